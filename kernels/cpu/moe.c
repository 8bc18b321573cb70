/* Mixture-of-experts routing on the CPU (see moe.h). */
#include "kernels/cpu/moe.h"

#include <math.h>
#include <string.h>

/* The k largest of s (E) into ix, highest first, the lower index on a tie; with group-limited routing only those of
 * the chosen groups (chosen[e / gs] != 0; NULL: every one). */
static void top_k(int32_t *ix, const float *s, int64_t E, int64_t k, const float *chosen, int64_t gs) {
  for (int64_t j = 0; j < k; j++) {
    int32_t best = -1;
    for (int64_t e = 0; e < E; e++) {
      bool taken = chosen && !chosen[e / gs];
      for (int64_t i = 0; i < j && !taken; i++) taken = ix[i] == (int32_t)e;
      if (!taken && (best < 0 || s[e] > s[best])) best = (int32_t)e;
    }
    ix[j] = best;
  }
}

/* Group-limited routing's groups of one token (Megatron-Core's group_limited_topk): a group's score is the sum of
 * its k / group_topk largest values of s, and the group_topk groups of the highest scores (a tie to the lower group)
 * get chosen[g] = 1, the others 0 (score: (groups) scratch). */
static void choose_groups(float *chosen, float *score, int32_t *ix, const float *s, int64_t E, int64_t k,
                          int64_t groups, int64_t group_topk) { /* ix: (max(k, groups)) scratch */
  const int64_t gs = E / groups, m = k / group_topk;
  for (int64_t g = 0; g < groups; g++) {
    top_k(ix, s + g * gs, gs, m, NULL, 1);
    score[g] = 0.0f;
    for (int64_t j = 0; j < m; j++) score[g] += s[g * gs + ix[j]];
  }
  top_k(ix, score, groups, group_topk, NULL, 1);
  for (int64_t g = 0; g < groups; g++) chosen[g] = 0.0f;
  for (int64_t j = 0; j < group_topk; j++) chosen[ix[j]] = 1.0f;
}

void px_k_moe_route_fwd(float *probs, int32_t *idx, float *gates, float *work, int64_t n, int64_t E, int64_t k,
                        bool sigmoid, bool norm, int64_t groups, int64_t group_topk) {
  const bool grouped = groups > 0, on_logits = !sigmoid && norm; /* Megatron's top-k over logits, softmax of k */
  float *chosen = grouped ? work : NULL, *score = grouped ? work + groups : NULL;
  int32_t *gix = grouped ? (int32_t *)(work + 2 * groups) : NULL;
  for (int64_t t = 0; t < n; t++) {
    float *p = probs + t * E;
    if (grouped && on_logits) choose_groups(chosen, score, gix, p, E, k, groups, group_topk);
    if (sigmoid) {
      for (int64_t e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
    } else {
      float mx = p[0], sum = 0.0f;
      for (int64_t e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
      for (int64_t e = 0; e < E; e++) sum += p[e] = expf(p[e] - mx);
      for (int64_t e = 0; e < E; e++) p[e] /= sum;
    }
    if (grouped && !on_logits) choose_groups(chosen, score, gix, p, E, k, groups, group_topk);
    int32_t *ix = idx + t * k;
    float *g = gates + t * k, total = 0.0f;
    top_k(ix, p, E, k, chosen, grouped ? E / groups : 1);
    for (int64_t j = 0; j < k; j++) total += g[j] = p[ix[j]];
    if (sigmoid || norm)
      for (int64_t j = 0; j < k; j++) g[j] /= total;
  }
}

int64_t px_k_moe_drop(int32_t *idx, float *gates, int64_t *work, int64_t n, int64_t E, int64_t k, int64_t capacity,
                      bool by_probs) {
  if (capacity >= n) return 0;
  int64_t dropped = 0;
  for (int32_t e = 0; e < (int32_t)E; e++) {
    int64_t m = 0; /* expert e's choices, in token order */
    for (int64_t i = 0; i < n * k; i++)
      if (idx[i] == e) work[m++] = i;
    for (int64_t a = 0; a < m && m > capacity; a++) {
      int64_t ahead = a; /* choices kept before this one: the earlier ones, or those of higher gate (earlier on a tie) */
      if (by_probs) {
        ahead = 0;
        for (int64_t b = 0; b < m; b++) {
          const float ga = gates[work[a]], gb = gates[work[b]];
          ahead += gb > ga || (gb == ga && b < a);
        }
      }
      if (ahead < capacity) continue;
      idx[work[a]] = ~e; /* its gate after the ranking, which reads the gates */
      dropped++;
    }
    for (int64_t a = 0; a < m; a++)
      if (idx[work[a]] < 0) gates[work[a]] = 0.0f;
  }
  return dropped;
}

void px_k_moe_shares(float *f, int32_t *work, const float *probs, int64_t n, int64_t E, int64_t k) {
  memset(f, 0, (size_t)E * sizeof *f);
  for (int64_t t = 0; t < n; t++) {
    top_k(work, probs + t * E, E, k, NULL, 1);
    for (int64_t j = 0; j < k; j++) f[work[j]] += 1.0f / (float)(n * k);
  }
}

void px_k_moe_route_bwd(float *dlogits, float *work, const float *dgates, const float *probs, const int32_t *idx,
                        const float *shares, int64_t n, int64_t E, int64_t k, bool sigmoid, bool norm, float aux) {
  float *dp = work, *f = work + E; /* a row's d probs; each expert's share of the choices */
  if (shares) memcpy(f, shares, (size_t)E * sizeof *f);
  else px_k_moe_shares(f, (int32_t *)dp, probs, n, E, k); /* dp's room before the rows need it */
  for (int64_t t = 0; t < n; t++) {
    const float *p = probs + t * E, *dg = dgates + t * k;
    const int32_t *ix = idx + t * k;
    for (int64_t e = 0; e < E; e++) dp[e] = aux > 0 ? aux * (float)E * f[e] / (float)n : 0.0f;
#define EX(j) px_k_moe_expert(ix[j]) /* the k experts chosen, dropped or not: s sums them all, as the gates did */
    if (sigmoid || norm) { /* g_j = p_j / s: dp_j = (dg_j - sum_l dg_l g_l) / s */
      float s = 0.0f, dot = 0.0f;
      for (int64_t j = 0; j < k; j++) s += p[EX(j)];
      for (int64_t j = 0; j < k; j++) dot += dg[j] * p[EX(j)] / s;
      for (int64_t j = 0; j < k; j++) dp[EX(j)] += (dg[j] - dot) / s;
    } else {
      for (int64_t j = 0; j < k; j++) dp[EX(j)] += dg[j];
    }
#undef EX
    float *dl = dlogits + t * E;
    if (sigmoid) {
      for (int64_t e = 0; e < E; e++) dl[e] += dp[e] * p[e] * (1.0f - p[e]);
    } else { /* softmax: dl = p (dp - sum p dp) */
      float dot = 0.0f;
      for (int64_t e = 0; e < E; e++) dot += p[e] * dp[e];
      for (int64_t e = 0; e < E; e++) dl[e] += p[e] * (dp[e] - dot);
    }
  }
}

void px_k_moe_positions(int64_t *pos, int32_t *counts, int64_t *start, const int32_t *idx, int64_t n, int64_t E,
                        int64_t k) {
  memset(start, 0, (size_t)(E + 1) * sizeof *start);
  for (int64_t i = 0; i < n * k; i++)
    if (idx[i] >= 0) start[idx[i] + 1]++;
  if (counts)
    for (int64_t e = 0; e < E; e++) counts[e] = (int32_t)start[e + 1];
  for (int64_t e = 0; e < E; e++) start[e + 1] += start[e];
  for (int64_t i = 0; i < n * k; i++) pos[i] = idx[i] >= 0 ? start[idx[i]]++ : -1; /* token order within an expert */
}

void px_k_moe_permute_fwd(float *send, const float *x, const int64_t *pos, int64_t n, int64_t h, int64_t k) {
  for (int64_t t = 0; t < n; t++)
    for (int64_t j = 0; j < k; j++)
      if (pos[t * k + j] >= 0) memcpy(send + pos[t * k + j] * h, x + t * h, (size_t)h * sizeof *send);
}

void px_k_moe_permute_bwd(float *dx, const float *dsend, const int64_t *pos, int64_t n, int64_t h, int64_t k) {
  for (int64_t t = 0; t < n; t++)
    for (int64_t j = 0; j < k; j++) {
      if (pos[t * k + j] < 0) continue;
      const float *r = dsend + pos[t * k + j] * h;
      for (int64_t c = 0; c < h; c++) dx[t * h + c] += r[c];
    }
}

void px_k_moe_unpermute_fwd(float *y, const float *ret, const float *gates, const int64_t *pos, int64_t n, int64_t h,
                            int64_t k) {
  for (int64_t t = 0; t < n; t++) {
    float *o = y + t * h;
    for (int64_t j = 0; j < k; j++) {
      if (pos[t * k + j] < 0) continue;
      const float *r = ret + pos[t * k + j] * h, g = gates ? gates[t * k + j] : 1.0f;
      for (int64_t c = 0; c < h; c++) o[c] += g * r[c];
    }
  }
}

void px_k_moe_unpermute_bwd(float *dret, float *dgates, const float *dy, const float *ret, const float *gates,
                            const int64_t *pos, int64_t n, int64_t h, int64_t k) {
  for (int64_t t = 0; t < n; t++) {
    const float *d = dy + t * h;
    for (int64_t j = 0; j < k; j++) {
      int64_t r = pos[t * k + j];
      if (r < 0) continue; /* dropped: its gate's gradient stays 0 */
      float g = gates ? gates[t * k + j] : 1.0f, dot = 0.0f;
      for (int64_t c = 0; c < h; c++) {
        dret[r * h + c] += g * d[c];
        if (dgates) dot += d[c] * ret[r * h + c];
      }
      if (dgates) dgates[t * k + j] += dot;
    }
  }
}
