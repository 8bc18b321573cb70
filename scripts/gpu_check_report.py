#!/usr/bin/env python3
"""The summary of scripts/gpu-check.sh: summary.json and summary.md in OUT_DIR,
from the check's work directory (steps.tsv, meta.env, runs/) and the calibrated
cluster file, written again after every step (each file under a temporary name,
then renamed), so that an interrupted check leaves what it had.

    gpu_check_report.py WORK_DIR OUT_DIR

Standard library only. Figures are read from parallax's own outputs; the
measured MFU is the simulator's definition (model FLOPs of a step over the
step's time and the datasheet peak of the plan's dtype) applied to the measured
step time: sim's MFU x its step time / the measured step time, on the preset.
"""
import json
import os
import re
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def load_last(path):
    """run --json's output: a JSON object a step, then the run's summary last."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    dec, pos, last = json.JSONDecoder(), 0, None
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return last
        try:
            last, pos = dec.raw_decode(text, pos)
        except ValueError:
            return None


def write(path, text):
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def meta_of(work):
    meta = {}
    try:
        with open(os.path.join(work, "meta.env")) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                meta[k] = v
    except OSError:
        pass
    return meta


def steps_of(work):
    steps = []
    try:
        with open(os.path.join(work, "steps.tsv")) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 4 or parts[0] in ("start", "end"):
                    continue
                name, status, secs, note = parts[:4]
                steps.append({"name": name, "status": status, "seconds": float(secs or 0), "note": note,
                              "log": "logs/%s.log" % name})
    except OSError:
        pass
    return steps


def gpu_of(env_txt):
    """The GPU as nvidia-smi's CSV line in env.txt says it."""
    gpu = {}
    try:
        lines = open(env_txt).read().splitlines()
    except OSError:
        return gpu
    for i, line in enumerate(lines):
        if line.startswith("name, driver_version") and i + 1 < len(lines):
            keys = [k.strip().split(" ")[0] for k in line.split(",")]
            vals = [v.strip() for v in lines[i + 1].split(",")]
            gpu = dict(zip(keys, vals))
            break
    return gpu


def slug(name):
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return re.sub(r"^nvidia-", "", s) or "unknown-gpu"


def calibration_of(path):
    c = load(path)
    if not c:
        return None
    g = c.get("gpu", {})
    peak = g.get("peak_tflops", {})
    sources = c.get("sources", {})
    gemm = []
    for p in g.get("gemm", {}).get("table", []):
        dt = p.get("dtype", "bf16")
        gemm.append({"m": p["m"], "n": p["n"], "k": p["k"], "dtype": dt, "efficiency": p["efficiency"],
                     "tflops": p["efficiency"] * peak.get(dt, 0)})
    mem = g.get("hbm_gb_per_s", 0) * g.get("memory_efficiency", 1)
    return {"file": "cluster-fragment.json", "gpu": g.get("name"), "peak_tflops": peak, "gemm": gemm,
            "sustained_share": g.get("sustained_share"), "sustained": sources.get("gpu.sustained_share"),
            "attention": g.get("attention", []), "memory_gb_per_s": mem,
            "memory_efficiency": g.get("memory_efficiency"), "memory": sources.get("gpu.memory_efficiency")}


def num(d, key):
    v = d.get(key) if d else None
    return v if isinstance(v, (int, float)) else None


def runs_of(work, meta):
    runs = []
    for m in meta.get("models", "").split():
        base = os.path.join(work, "runs", m)
        run = load_last(base + ".run.json")
        preset, cal, cmp = (load(base + s) for s in (".sim-preset.json", ".sim-calibrated.json", ".compare.json"))
        r = {"model": m, "plan": meta.get("plan", ""), "steps": meta.get("steps")}
        if run:
            r["measured"] = {"step_time_s": num(run, "step_time_s"), "tokens_per_s": num(run, "tokens_per_s"),
                             "losses": run.get("losses"), "peak_bytes": num(run, "peak_bytes"),
                             "predicted_peak_bytes": num(run, "predicted_peak_bytes")}
            ps, pm = num(preset, "step_time_s"), num(preset, "mfu")
            st = r["measured"]["step_time_s"]
            if ps and pm and st:
                r["measured"]["mfu"] = pm * ps / st
        for label, sim in (("preset", preset), ("calibrated", cal)):
            if sim:
                p = {"step_time_s": num(sim, "step_time_s"), "tokens_per_s": num(sim, "tokens_per_s"),
                     "mfu": num(sim, "mfu")}
                mt = r.get("measured", {}).get("step_time_s")
                if mt and p["step_time_s"]:
                    p["error"] = (p["step_time_s"] - mt) / mt
                r.setdefault("predicted", {})[label] = p
        if cmp:
            r["compare"] = cmp
        runs.append(r)
    return runs


def fmt(v, spec="%.4g", none="-"):
    return none if v is None else spec % v


def pct(v):
    return "-" if v is None else "%+.1f%%" % (100 * v)


def markdown(s):
    out = []
    emu = s["mode"] == "emu"
    out.append("# GPU check: %s" % (s["gpu"].get("name") or s["calibration_gpu"] or "no GPU found"))
    out.append("")
    if emu:
        out.append("**Emulated GPU (tests/gpu/emu, `--emu`): every figure below is a CPU's, not a GPU measurement.**")
        out.append("")
    out.append("`scripts/gpu-check.sh` at commit %s, %s to %s (%s s of a %s s budget). Commit as `%s/`." %
               (s["commit"], s["started"], s["updated"], s["elapsed_s"], s["budget_s"], s["suggested_dir"]))
    if s["gpu"]:
        out.append("")
        out.append("GPU: " + ", ".join("%s %s" % (k, v) for k, v in s["gpu"].items()))
    out.append("")
    out.append("## Steps")
    out.append("")
    out.append("| step | status | seconds | note |")
    out.append("|---|---|---:|---|")
    for st in s["steps"]:
        out.append("| %s | %s | %.1f | %s |" % (st["name"], st["status"], st["seconds"], st["note"].replace("|", "\\|")))
    cal = s.get("calibration")
    if cal:
        out.append("")
        out.append("## Calibration (`cluster-fragment.json`)")
        out.append("")
        if s.get("fast_accum"):  # calibrate's progress line; the share is gpu.gemm.fp8_split_accumulation_share
            out.append("fp8 with fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM): %s" % s["fast_accum"])
            out.append("")
        if s.get("gemm_streams"):  # few-tile GEMMs at once on a few streams, as Transformer Engine runs them
            out.append("GEMMs on several streams (a MoE layer's experts, TP chunks), beside one stream:")
            out.append("")
            out.extend("- " + l for l in s["gemm_streams"])
            out.append("")
        out.append("Memory: %s GB/s (%s of the datasheet's). %s" %
                   (fmt(cal["memory_gb_per_s"]), fmt(cal["memory_efficiency"], "%.3f"), cal.get("memory") or ""))
        out.append("")
        out.append("Sustained share %s: %s" % (fmt(cal["sustained_share"], "%.3f"), cal.get("sustained") or ""))
        out.append("")
        out.append("| m | n | k | dtype | TFLOP/s | of peak |")
        out.append("|---:|---:|---:|---|---:|---:|")
        for p in cal["gemm"]:
            out.append("| %d | %d | %d | %s | %s | %.3f |" % (p["m"], p["n"], p["k"], p["dtype"], fmt(p["tflops"]),
                                                            p["efficiency"]))
        if cal["attention"]:
            out.append("")
            out.append("| attention (flash, causal) | head dim | TFLOP/s by sequence length |")
            out.append("|---|---:|---|")
            for a in cal["attention"]:
                out.append("| %s | %d | %s |" % (a["pass"], a["head_dim"], ", ".join(
                    "%d: %s" % (q, fmt(t)) for q, t in zip(a["seq"], a["tflops"]))))
    runs = [r for r in s["runs"] if r.get("measured") or r.get("predicted")]
    if runs:
        out.append("")
        out.append("## Runs: measured and predicted (`%s`, one GPU)" % (runs[0]["plan"]))
        out.append("")
        out.append("| model | step (measured) | tokens/s | MFU | predicted, calibrated | error | predicted, preset | error |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in runs:
            me, pr = r.get("measured", {}), r.get("predicted", {})
            c, p = pr.get("calibrated", {}), pr.get("preset", {})
            out.append("| %s | %s s | %s | %s | %s s | %s | %s s | %s |" % (
                r["model"], fmt(me.get("step_time_s")), fmt(me.get("tokens_per_s"), "%.0f"),
                fmt(me.get("mfu"), "%.3f"), fmt(c.get("step_time_s")), pct(c.get("error")),
                fmt(p.get("step_time_s")), pct(p.get("error"))))
        for r in runs:
            cmp = r.get("compare")
            if not cmp:
                continue
            out.append("")
            out.append("`parallax compare`, %s (calibrated file):" % r["model"])
            out.append("")
            out.append("| row | predicted s | measured s | error |")
            out.append("|---|---:|---:|---:|")
            for stage in cmp.get("stages", []):
                for row in stage.get("rows", []):
                    out.append("| %s | %s | %s | %s |" % (row["row"], fmt(row["predicted_s"]), fmt(row["measured_s"]),
                                                         pct(row.get("error"))))
            ops = [o for stage in cmp.get("stages", []) for o in stage.get("ops", [])][:12]
            if ops:  # the kernels behind the rows, the longest measured first
                out.append("")
                out.append("| op kind | ops | predicted s | measured s | error |")
                out.append("|---|---:|---:|---:|---:|")
                for o in ops:
                    out.append("| %s | %d | %s | %s | %s |" % (o["kind"], o["count"], fmt(o["predicted_s"]),
                                                              fmt(o["measured_s"]), pct(o.get("error"))))
    out.append("")
    out.append("Logs, the runs' JSON, profiles and predictions: `details.tar.gz` (work directory `%s`)." % s["work"])
    return "\n".join(out) + "\n"


def calibrate_lines(work, *has):
    """calibrate's progress lines (its log) that contain every one of has, without the prefix."""
    try:
        with open(os.path.join(work, "logs", "calibrate.log")) as f:
            return [l.strip().split("calibrate: ", 1)[-1] for l in f if all(h in l for h in has)]
    except OSError:
        return []


def fast_accum_of(work):
    """calibrate's summary line of fp8 with fast accumulation (its log), or None."""
    lines = calibrate_lines(work, "fp8 with fast accumulation:")
    return lines[0].split("fp8 with fast accumulation:", 1)[1].strip() if lines else None


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: gpu_check_report.py WORK_DIR OUT_DIR\n")
        return 2
    work, out = sys.argv[1], sys.argv[2]
    meta = meta_of(work)
    gpu = gpu_of(os.path.join(out, "env.txt"))
    cal = calibration_of(os.path.join(out, "cluster-fragment.json"))
    name = gpu.get("name") or (cal or {}).get("gpu") or "unknown-gpu"
    s = {
        "tool": "scripts/gpu-check.sh", "mode": meta.get("mode", "?"), "commit": meta.get("commit", "?"),
        "started": meta.get("started", "?"), "updated": meta.get("updated", "?"),
        "elapsed_s": int(meta.get("elapsed_s", "0") or 0), "budget_s": int(meta.get("budget_s", "0") or 0),
        "suggested_dir": "bench/gpu/%s%s-%s" % ("emulated-" if meta.get("mode") == "emu" else "", slug(name),
                                                 meta.get("started", "?")[:10]),
        "gpu": gpu, "calibration_gpu": (cal or {}).get("gpu"), "steps": steps_of(work), "calibration": cal,
        "runs": runs_of(work, meta), "work": meta.get("work", work), "fast_accum": fast_accum_of(work),
        "gemm_streams": calibrate_lines(work, " GEMMs ", " stream", "TFLOP/s"),
    }
    write(os.path.join(out, "summary.json"), json.dumps(s, indent=1) + "\n")
    write(os.path.join(out, "summary.md"), markdown(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
