#!/usr/bin/env python3
"""Writes tests/data/export/<framework>_args.tsv: the names, value types and
choices each framework defines for the settings `parallax export` writes, read
from the framework's own source (a git checkout at a given commit) with
Python's ast module, nothing imported or run. Facts only: one line a setting,
`name<TAB>type<TAB>choices` (choices comma-separated, empty when free).

  python3 tests/tools/export_facts.py --megatron DIR --bridge DIR --torchtitan DIR \
      --deepspeed DIR --pytorch-schedules FILE --out tests/data/export

Each DIR is a git directory; the commits are the ones named below (COMMITS).
"""
import argparse
import ast
import os
import subprocess
import sys

COMMITS = {
    # Megatron-LM at the commit Megatron-Bridge v0.6.0 pins (3rdparty/Megatron-LM)
    "megatron": "cd4afffa648426a959dc7cb1e24b5ce7d0c3ff54",
    "bridge": "v0.6.0",
    "torchtitan": "v0.2.2",  # the last release configured by TOML files
    "deepspeed": "v0.19.5",
}


def git_show(repo, commit, path):
    return subprocess.run(["git", "--git-dir", repo, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def rev(repo, commit):
    return subprocess.run(["git", "--git-dir", repo, "rev-parse", commit + "^{commit}"], check=True,
                          capture_output=True, text=True).stdout.strip()


class Classes:
    """Class definitions of some source files, by name."""

    def __init__(self):
        self.defs = {}

    def add(self, source):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                self.defs.setdefault(node.name, node)

    def fields(self, name):
        """Dataclass fields, the bases' first: name -> (annotation, default, argparse_meta, init)."""
        node = self.defs[name]
        out = {}
        for b in node.bases:
            bn = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
            if bn in self.defs and bn != name:
                out.update(self.fields(bn))
        for st in node.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            default, meta, init = st.value, None, True
            if isinstance(default, ast.Call) and getattr(default.func, "id", getattr(default.func, "attr", "")) in (
                    "field", "Field"):
                call = default
                default = call.args[0] if call.args else None
                for kw in call.keywords:
                    if kw.arg == "default":
                        default = kw.value
                    elif kw.arg == "default_factory":
                        default = ast.Constant(value="<factory>")
                    elif kw.arg == "init":
                        init = not (isinstance(kw.value, ast.Constant) and kw.value.value is False)
                    elif kw.arg == "metadata" and isinstance(kw.value, ast.Dict):
                        for k, v in zip(kw.value.keys, kw.value.values):
                            if isinstance(k, ast.Constant) and k.value == "argparse_meta":
                                meta = v
                    elif kw.arg == "alias" and isinstance(kw.value, ast.Constant):
                        meta = kw.value.value  # pydantic: the JSON key
            out[st.target.id] = (st.annotation, default, meta, init)
        return out

    def enum_members(self, name):
        node = self.defs.get(name)
        if node is None:
            return None
        return [t.id for st in node.body if isinstance(st, ast.Assign) for t in st.targets if isinstance(t, ast.Name)]


def unwrap(ann, classes):
    """(type, choices, is_list) of an annotation: Optional and `| None` removed."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        ann = ast.parse(ann.value, mode="eval").body
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        parts = [p for p in (ann.left, ann.right) if not (isinstance(p, ast.Constant) and p.value is None)]
        return unwrap(parts[0], classes) if len(parts) == 1 else ("union", "", False)
    if isinstance(ann, ast.Subscript):
        head = ann.value.id if isinstance(ann.value, ast.Name) else getattr(ann.value, "attr", "")
        args = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if head == "Optional":
            return unwrap(args[0], classes)
        if head == "Union":
            rest = [a for a in args if not (isinstance(a, ast.Constant) and a.value is None)]
            return unwrap(rest[0], classes) if len(rest) == 1 else ("union", "", False)
        if head == "Literal":
            vals = [a.value for a in args if isinstance(a, ast.Constant)]
            return (type(vals[0]).__name__, ",".join(str(v) for v in vals), False)
        if head in ("list", "List", "Tuple", "tuple"):
            t, c, _ = unwrap(args[0], classes)
            return (t, c, True)
        return (head, "", False)
    if isinstance(ann, ast.Name):
        members = classes.enum_members(ann.id) if ann.id not in ("int", "float", "str", "bool") else None
        if members:
            return ("enum", ",".join(members), False)
        return (ann.id, "", False)
    if isinstance(ann, ast.Attribute):
        return (ann.attr, "", False)
    return ("?", "", False)


def literal(node):
    try:
        return ast.literal_eval(node)
    except Exception:
        return None


# ---- Megatron-LM: megatron/training/arguments.py ----

MEGATRON_CLASS_FILES = [
    "megatron/core/model_parallel_config.py",
    "megatron/core/transformer/transformer_config.py",
    "megatron/core/transformer/enums.py",
    "megatron/training/config/common_config.py",
    "megatron/training/config/training_config.py",
    "megatron/training/config/resilience_config.py",
    "megatron/core/fault_injector.py",
]


def megatron_args(repo, commit):
    classes = Classes()
    for f in MEGATRON_CLASS_FILES:
        classes.add(git_show(repo, commit, f))
    tree = ast.parse(git_show(repo, commit, "megatron/training/arguments.py"))
    rows = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        lists = {}  # local name -> list literal (a factory's exclude=)
        for st in ast.walk(fn):
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                v = literal(st.value)
                if isinstance(v, list):
                    lists[st.targets[0].id] = v
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            name = getattr(call.func, "attr", getattr(call.func, "id", ""))
            if name == "add_argument":
                kws = {k.arg: k.value for k in call.keywords}
                opts = [a.value for a in call.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
                action = literal(kws["action"]) if "action" in kws else None
                typ = "flag" if action in ("store_true", "store_false") else (
                    kws["type"].id if "type" in kws and isinstance(kws["type"], ast.Name) else "str")
                choices = literal(kws["choices"]) if "choices" in kws else None
                for o in opts:
                    rows[o] = (typ, ",".join(str(c) for c in choices) if choices else "")
            elif name == "ArgumentGroupFactory" and call.args and isinstance(call.args[0], ast.Name):
                exclude = []
                for k in call.keywords:
                    if k.arg == "exclude":
                        exclude = literal(k.value) if isinstance(k.value, ast.List) else lists.get(k.value.id, [])
                for fname, (ann, default, meta, init) in classes.fields(call.args[0].id).items():
                    if fname in exclude or not init:
                        continue
                    typ, choices, _ = unwrap(ann, classes)
                    names = ["--" + fname.replace("_", "-")]
                    if typ == "bool":
                        typ = "flag"
                        if not (isinstance(default, ast.Constant) and default.value is False):  # store_false
                            names = ["--no-" + fname.replace("_", "-"), "--disable-" + fname.replace("_", "-")]
                    if isinstance(meta, ast.Dict):
                        m = {k.value: v for k, v in zip(meta.keys, meta.values) if isinstance(k, ast.Constant)}
                        if "arg_names" in m:
                            names = literal(m["arg_names"])
                        if "choices" in m and literal(m["choices"]):
                            choices = ",".join(str(c) for c in literal(m["choices"]))
                    for n in names:
                        rows[n] = (typ, choices)
    # --cp-comm-type has no argparse choices: TransformerConfig.cp_comm_type's docstring names them
    doc = git_show(repo, commit, "megatron/core/transformer/transformer_config.py")
    values = ["p2p", "all_gather", "a2a", "a2a+p2p"]
    line = 'cp_comm_type of each layer can be "p2p" or "all_gather" or "a2a" or "a2a+p2p".'
    if line not in doc:
        sys.exit("megatron: the cp_comm_type docstring changed; check its values")
    rows["--cp-comm-type"] = ("str", ",".join(values))
    return rows


# ---- Megatron-Bridge: ConfigContainer overrides section.field ----

BRIDGE_SECTIONS = {
    # section: (class, where it is defined: "bridge" or "megatron")
    "model": "GPTModelProvider",
    "train": "TrainingConfig",
    "ddp": "DistributedDataParallelConfig",
    "dist": "DistributedInitConfig",
    "dataset": "GPTDatasetConfig",
    "checkpoint": "CheckpointConfig",
    "comm_overlap": "CommOverlapConfig",
    "rerun_state_machine": "RerunStateMachineConfig",
}
BRIDGE_FILES = [
    "src/megatron/bridge/training/config.py",
    "src/megatron/bridge/models/gpt_provider.py",
    "src/megatron/bridge/training/comm_overlap.py",
]
MCORE_FILES_FOR_BRIDGE = MEGATRON_CLASS_FILES + [
    "megatron/core/distributed/distributed_data_parallel_config.py",
    "megatron/core/datasets/gpt_dataset.py",
    "megatron/core/datasets/blended_megatron_dataset_config.py",
]


def bridge_args(bridge, bcommit, megatron, mcommit):
    classes = Classes()
    for f in BRIDGE_FILES:  # the bridge's own subclasses first: they shadow Megatron's names
        classes.add(git_show(bridge, bcommit, f))
    mcore = Classes()
    for f in MCORE_FILES_FOR_BRIDGE:
        mcore.add(git_show(megatron, mcommit, f))
    # a bridge class's base of the same name is Megatron's (imported under another name)
    for name, node in mcore.defs.items():
        classes.defs.setdefault(name, node)
        classes.defs.setdefault("MCore" + name, node)
        classes.defs.setdefault("MTrain" + name, node)
    classes.defs["TransformerConfig"] = mcore.defs["TransformerConfig"]
    rows = {}
    for section, cls in BRIDGE_SECTIONS.items():
        for fname, (ann, default, meta, init) in classes.fields(cls).items():
            if init and not fname.startswith("_"):
                typ, choices, _ = unwrap(ann, classes)
                rows[f"{section}.{fname}"] = (typ, choices)
    # mixed_precision: the name of a registered recipe (training/mixed_precision.py, @register)
    mp = ast.parse(git_show(bridge, bcommit, "src/megatron/bridge/training/mixed_precision.py"))
    recipes = [f.name for f in mp.body if isinstance(f, ast.FunctionDef) and
               any(getattr(d, "id", "") == "register" for d in f.decorator_list)]
    rows["mixed_precision"] = ("str", ",".join(recipes))
    # str fields whose values Megatron's CLI or docstrings name (the same Megatron-Core fields)
    cli = megatron_args(megatron, mcommit)
    rows["ddp.data_parallel_sharding_strategy"] = ("str", cli["--data-parallel-sharding-strategy"][1])
    rows["model.cp_comm_type"] = ("str", cli["--cp-comm-type"][1])
    return rows


# ---- torchtitan: the TOML sections of torchtitan/config/job_config.py ----

def torchtitan_args(repo, commit, schedules_file):
    classes = Classes()
    src = git_show(repo, commit, "torchtitan/config/job_config.py")
    classes.add(src)
    rows = {}

    def walk(cls, prefix):
        for fname, (ann, default, meta, init) in classes.fields(cls).items():
            typ, choices, is_list = unwrap(ann, classes)
            if typ in classes.defs and not is_list:
                walk(typ, f"{prefix}{fname}.")
            else:
                rows[prefix + fname] = (("list[" + typ + "]") if is_list else typ, choices)

    walk("JobConfig", "")
    # pipeline_parallel_schedule: a name torch.distributed.pipelining's get_schedule_class knows
    tree = ast.parse(open(schedules_file).read())
    names = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name == "get_schedule_class":
            for d in ast.walk(fn):
                if isinstance(d, ast.Dict):
                    names = [k.value for k in d.keys if isinstance(k, ast.Constant)]
    if not names:
        sys.exit("torchtitan: no schedule map in get_schedule_class")
    rows["parallelism.pipeline_parallel_schedule"] = ("str", ",".join(names))
    # model.converters: the names register_model_converter registers
    conv = []
    for path in ("torchtitan/components/quantization/float8.py", "torchtitan/components/quantization/mx.py"):
        for call in ast.walk(ast.parse(git_show(repo, commit, path))):
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "register_model_converter":
                conv.append(call.args[1].value)
    rows["model.converters"] = ("list[str]", ",".join(conv))
    return rows


# ---- DeepSpeed: the JSON config's keys ----

def deepspeed_args(repo, commit):
    classes = Classes()
    for f in ("deepspeed/runtime/zero/config.py", "deepspeed/runtime/zero/offload_config.py",
              "deepspeed/runtime/precision_config.py", "deepspeed/runtime/config.py"):
        classes.add(git_show(repo, commit, f))
    rows = {}
    for cls, prefix in (("DeepSpeedZeroConfig", "zero_optimization."),
                        ("DeepSpeedZeroOffloadOptimizerConfig", "zero_optimization.offload_optimizer."),
                        ("DeepSpeedZeroOffloadParamConfig", "zero_optimization.offload_param."),
                        ("DeepSpeedBF16Config", "bf16."), ("DeepSpeedFP16Config", "fp16.")):
        for fname, (ann, default, meta, init) in classes.fields(cls).items():
            typ, choices, _ = unwrap(ann, classes)
            key = meta if isinstance(meta, str) else fname  # the alias is what the JSON spells
            rows[prefix + key] = (typ, choices)
    # stage: ZeroStageEnum's values
    node = classes.defs["ZeroStageEnum"]
    vals = [str(st.value.value) for st in node.body if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant)]
    rows["zero_optimization.stage"] = ("int", ",".join(dict.fromkeys(vals)))  # max_stage repeats 3
    for key in ("zero_optimization.offload_optimizer.device", "zero_optimization.offload_param.device"):
        rows[key] = ("str", ",".join(v.lower() for v in classes.enum_members("OffloadDeviceEnum")))
    # top-level keys: runtime/constants.py's NAME = "key" for the batch and data types
    consts = {}
    for st in ast.parse(git_show(repo, commit, "deepspeed/runtime/constants.py")).body:
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            consts[st.targets[0].id] = st.value.value
    for name, typ in (("TRAIN_BATCH_SIZE", "int"), ("TRAIN_MICRO_BATCH_SIZE_PER_GPU", "int"),
                      ("GRADIENT_ACCUMULATION_STEPS", "int")):
        rows[consts[name]] = (typ, "")
    # grad_accum_dtype's values: the comment above the constants names them
    src = git_show(repo, commit, "deepspeed/runtime/constants.py")
    line = '#   grad_accum_dtype=["bf16"|"fp16"|"fp32"]'
    if line not in src:
        sys.exit("deepspeed: the grad_accum_dtype comment changed; check its values")
    rows[consts["DATA_TYPES"] + "." + consts["GRAD_ACCUM_DTYPE"]] = ("str", "bf16,fp16,fp32")
    return rows


def write(out, fw, header, rows):
    path = os.path.join(out, f"{fw}_args.tsv")
    with open(path, "w") as f:
        for h in header:
            f.write(f"# {h}\n")
        f.write("# Written by tests/tools/export_facts.py: facts only (names, types, choices).\n")
        f.write("# name\ttype\tchoices\n")
        for k in sorted(rows):
            f.write(f"{k}\t{rows[k][0]}\t{rows[k][1]}\n")
    print(f"{path}: {len(rows)} settings")


def main():
    ap = argparse.ArgumentParser()
    for k in ("megatron", "bridge", "torchtitan", "deepspeed"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--pytorch-schedules", required=True,
                    help="torch/distributed/pipelining/schedules.py, with its commit in --pytorch-commit")
    ap.add_argument("--pytorch-commit", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    c = {k: rev(getattr(a, k), v) for k, v in COMMITS.items()}
    write(a.out, "megatron", [
        "Megatron-LM's command-line arguments (megatron/training/arguments.py, and the dataclass fields its",
        "ArgumentGroupFactory turns into arguments: megatron/core/model_parallel_config.py,",
        "megatron/core/transformer/transformer_config.py, megatron/training/config/*.py).",
        f"Source: GitHub NVIDIA/Megatron-LM, commit {c['megatron']}",
        "(the Megatron-LM that Megatron-Bridge v0.6.0 pins as 3rdparty/Megatron-LM).",
        "--cp-comm-type's choices: TransformerConfig.cp_comm_type's docstring (argparse gives none)."],
        megatron_args(a.megatron, c["megatron"]))
    write(a.out, "nemo", [
        "Megatron-Bridge's ConfigContainer overrides (section.field=value, scripts/training/run_recipe.py):",
        "the fields of the section's dataclass (src/megatron/bridge/training/config.py and the",
        "Megatron-Core classes it extends), and mixed_precision's registered recipe names",
        "(src/megatron/bridge/training/mixed_precision.py).",
        f"Source: GitHub NVIDIA-NeMo/Megatron-Bridge v0.6.0, commit {c['bridge']};",
        f"Megatron-Core from GitHub NVIDIA/Megatron-LM, commit {c['megatron']} (the one it pins).",
        "ddp.data_parallel_sharding_strategy's and model.cp_comm_type's choices: those of Megatron-LM's",
        "--data-parallel-sharding-strategy and --cp-comm-type (the same fields; the dataclass types them str)."],
        bridge_args(a.bridge, c["bridge"], a.megatron, c["megatron"]))
    write(a.out, "torchtitan", [
        "torchtitan's TOML job config: section.key for every field of JobConfig",
        "(torchtitan/config/job_config.py); model.converters' names from register_model_converter",
        "(torchtitan/components/quantization/float8.py, mx.py).",
        f"Source: GitHub pytorch/torchtitan v0.2.2, commit {c['torchtitan']}.",
        "parallelism.pipeline_parallel_schedule's choices: the names get_schedule_class accepts,",
        f"torch/distributed/pipelining/schedules.py of GitHub pytorch/pytorch, commit {a.pytorch_commit}."],
        torchtitan_args(a.torchtitan, c["torchtitan"], a.pytorch_schedules))
    write(a.out, "deepspeed", [
        "DeepSpeed's JSON config: zero_optimization.* (deepspeed/runtime/zero/config.py, offload_config.py;",
        "a field's alias is the key the JSON spells), bf16.* and fp16.* (deepspeed/runtime/precision_config.py),",
        "the batch keys and data_types.grad_accum_dtype (deepspeed/runtime/constants.py; its values",
        "from the comment there).",
        f"Source: GitHub deepspeedai/DeepSpeed v0.19.5, commit {c['deepspeed']}."],
        deepspeed_args(a.deepspeed, c["deepspeed"]))


if __name__ == "__main__":
    main()
