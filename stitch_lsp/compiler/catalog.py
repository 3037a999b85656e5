"""The op catalog: one entry per elementwise op, one per module captured whole.

An `EwOp` holds every spelling of an op (torch functions, tensor methods, nn modules, ATen
overloads), its arity, its parameters and where each spelling keeps them, its CUDA expression
and its torch reference (the tests' CPU interpreter evaluates it). Capture, the IR, codegen and
the interpreter all read this table, so adding an op is adding an entry.

A `LeafModule` names a module type that is captured as one IR node, in the fx path and the
ATen path alike: its capture function (a `package.module:function` string, resolved on the torch
side) receives a `capture_leaves.LeafCall` and returns the module's outputs as IR values.

This module is torch-free: spellings are dotted names that capture resolves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NOT_GIVEN = "<not given>"  # a `when` value: the parameter was absent or None


@dataclass(frozen=True)
class Param:
    """A float (or string) parameter of an op and where each spelling passes it.

    `arg` is the position in a torch function or method call (0 is the tensor), `kwarg` its
    keyword there and in the ATen schema, `attr` the attribute of the module spelling, and
    `aten` its position in the ATen schema when that differs from `arg`.
    """

    name: str
    default: float | str | None
    arg: int | None = None
    kwarg: str | None = None
    attr: str | None = None
    aten: int | None = None

    @property
    def aten_pos(self) -> int | None:
        return self.aten if self.aten is not None else self.arg


@dataclass(frozen=True)
class EwOp:
    """One elementwise op.

    cuda: a C expression over the operands `{0}`, `{1}`, ... and the parameters by name
      (floats are written as C float literals); ops with `index` also get `{row}` and `{col}`,
      the element's coordinates in the last two dims of its shape.
    ref: a torch expression over the operands `a`, `b`, `c` and the parameters by name.
    when: (param, value) pairs that select this entry among entries with the same spellings
      (`NOT_GIVEN` matches a parameter that was absent or None).
    result: "bool" for predicates (they compute 1.f / 0.f in registers); "same" for ops whose
      result has their first operand's dtype (a copy, a triangle of a mask).
    """

    name: str
    arity: int
    cuda: str
    ref: str
    functions: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    aten: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    when: tuple[tuple[str, object], ...] = ()
    result: str = "float32"
    index: bool = False


@dataclass(frozen=True)
class LeafModule:
    """A module type captured whole, as the IR its capture function builds (see the module doc).

    modules: dotted type names, e.g. "torch.nn.LSTM" (subclasses match too).
    capture: "package.module:function"; the function takes a `LeafCall` and returns the
      module's output structure with IR `Use`s in place of tensors.
    outputs: optional "package.module:function" taking (module, *args, **kwargs) on meta or
      fake tensors and returning the output structure (e.g. `torch.empty(shape, device=...)`
      per tensor) without running forward; without it forward runs on meta tensors, which for
      a recurrent module means every time step, slowly.
    """

    modules: tuple[str, ...]
    capture: str
    outputs: str = ""
    note: str = ""


def _unary(
    name: str,
    cuda: str,
    ref: str,
    *,
    functions: tuple[str, ...] = (),
    methods: tuple[str, ...] = (),
    modules: tuple[str, ...] = (),
    aten: tuple[str, ...] | None = None,
    params: tuple[Param, ...] = (),
    when: tuple[tuple[str, object], ...] = (),
    result: str = "float32",
    index: bool = False,
) -> EwOp:
    return EwOp(
        name,
        1,
        cuda,
        ref,
        functions,
        methods,
        modules,
        (f"{name}.default", f"{name}_.default") if aten is None else aten,
        params,
        when,
        result,
        index,
    )


def _binary(
    name: str,
    cuda: str,
    ref: str,
    *,
    functions: tuple[str, ...] = (),
    methods: tuple[str, ...] = (),
    aten: tuple[str, ...] = (),
    result: str = "float32",
) -> EwOp:
    return EwOp(name, 2, cuda, ref, functions, methods, (), aten, (), (), result)


_SLOPE = Param("slope", 0.01, 1, "negative_slope", "negative_slope")
_ALPHA = Param("alpha", 1.0, 1, "alpha", "alpha")
_BETA = Param("beta", 1.0, 1, "beta", "beta")
_THRESHOLD = Param("threshold", 20.0, 2, "threshold", "threshold")
_APPROX = Param("approximate", "none", 1, "approximate", "approximate")
_HT_LO = Param("lo", -1.0, 1, "min_val", "min_val")
_HT_HI = Param("hi", 1.0, 2, "max_val", "max_val")
_LO = Param("lo", None, 1, "min")
_HI = Param("hi", None, 2, "max")
_DIAG = Param("diagonal", 0.0, 1, "diagonal")

EW_OPS: tuple[EwOp, ...] = (
    # -- arithmetic --------------------------------------------------------------------------
    _binary(
        "add",
        "({0} + {1})",
        "torch.add(a, b)",
        functions=("operator.add", "operator.iadd", "torch.add"),
        methods=("add", "add_"),
        aten=("add.Tensor", "add.Scalar", "add_.Tensor", "add_.Scalar"),
    ),
    _binary(
        "sub",
        "({0} - {1})",
        "torch.sub(a, b)",
        functions=("operator.sub", "operator.isub", "torch.sub", "torch.subtract"),
        methods=("sub", "sub_", "subtract"),
        aten=("sub.Tensor", "sub.Scalar", "sub_.Tensor", "sub_.Scalar"),
    ),
    _binary(
        "mul",
        "({0} * {1})",
        "torch.mul(a, b)",
        functions=("operator.mul", "operator.imul", "torch.mul", "torch.multiply"),
        methods=("mul", "mul_", "multiply"),
        aten=("mul.Tensor", "mul.Scalar", "mul_.Tensor", "mul_.Scalar"),
    ),
    _binary(
        "div",
        "({0} / {1})",
        "torch.div(a, b)",
        functions=(
            "operator.truediv",
            "operator.itruediv",
            "torch.div",
            "torch.true_divide",
            "torch.divide",
        ),
        methods=("div", "div_", "divide", "true_divide"),
        aten=("div.Tensor", "div.Scalar", "div_.Tensor", "div_.Scalar"),
    ),
    _binary(
        "maximum",
        "fmaxf({0}, {1})",
        "torch.maximum(a, b)",
        functions=("torch.maximum",),
        methods=("maximum",),
        aten=("maximum.default",),
    ),
    _binary(
        "minimum",
        "fminf({0}, {1})",
        "torch.minimum(a, b)",
        functions=("torch.minimum",),
        methods=("minimum",),
        aten=("minimum.default",),
    ),
    _binary(
        "pow",
        "powf({0}, {1})",
        "torch.pow(a, b)",
        functions=("operator.pow", "torch.pow"),
        methods=("pow",),
        aten=("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar"),
    ),
    # max + log(sum exp), the last step of logsumexp (made by capture, never spelled)
    _binary(
        "lse_finish",
        "st_lse_finish({0}, {1})",
        "torch.where(torch.isinf(a), a, a + torch.log(b))",
    ),
    # -- unary math --------------------------------------------------------------------------
    _unary("identity", "{0}", "a", aten=(), result="same"),
    _unary(
        "neg",
        "(-{0})",
        "torch.neg(a)",
        functions=("operator.neg", "torch.neg", "torch.negative"),
        methods=("neg", "negative"),
    ),
    _unary("abs", "fabsf({0})", "torch.abs(a)", functions=("torch.abs",), methods=("abs",)),
    _unary("exp", "expf({0})", "torch.exp(a)", functions=("torch.exp",), methods=("exp",)),
    _unary("log", "logf({0})", "torch.log(a)", functions=("torch.log",), methods=("log",)),
    _unary(
        "log1p", "log1pf({0})", "torch.log1p(a)", functions=("torch.log1p",), methods=("log1p",)
    ),
    _unary("sqrt", "sqrtf({0})", "torch.sqrt(a)", functions=("torch.sqrt",), methods=("sqrt",)),
    _unary(
        "rsqrt", "rsqrtf({0})", "torch.rsqrt(a)", functions=("torch.rsqrt",), methods=("rsqrt",)
    ),
    _unary(
        "reciprocal",
        "(1.f / {0})",
        "torch.reciprocal(a)",
        functions=("torch.reciprocal",),
        methods=("reciprocal",),
    ),
    _unary(
        "square",
        "({0} * {0})",
        "torch.square(a)",
        functions=("torch.square",),
        methods=("square",),
        aten=(),
    ),
    # x ** 3 as ATen's pow kernel computes it (two multiplies, not powf's log and exp)
    _unary("cube", "({0} * {0} * {0})", "a * a * a", aten=()),
    _unary(
        "expm1", "expm1f({0})", "torch.expm1(a)", functions=("torch.expm1",), methods=("expm1",)
    ),
    _unary("erf", "erff({0})", "torch.erf(a)", functions=("torch.erf",), methods=("erf",)),
    _unary("sin", "sinf({0})", "torch.sin(a)", functions=("torch.sin",), methods=("sin",)),
    _unary("cos", "cosf({0})", "torch.cos(a)", functions=("torch.cos",), methods=("cos",)),
    _unary(
        "floor", "floorf({0})", "torch.floor(a)", functions=("torch.floor",), methods=("floor",)
    ),
    _unary("ceil", "ceilf({0})", "torch.ceil(a)", functions=("torch.ceil",), methods=("ceil",)),
    _unary(
        "trunc", "truncf({0})", "torch.trunc(a)", functions=("torch.trunc",), methods=("trunc",)
    ),
    _unary(
        "sign",
        "(float)(({0} > 0.f) - ({0} < 0.f))",
        "torch.sign(a)",
        functions=("torch.sign",),
        methods=("sign",),
    ),
    # -- activations -------------------------------------------------------------------------
    _unary(
        "relu",
        "st_relu({0})",
        "torch.relu(a)",
        functions=("torch.relu", "torch.nn.functional.relu"),
        methods=("relu", "relu_"),
        modules=("torch.nn.ReLU",),
        aten=("relu.default", "relu_.default"),
    ),
    _unary(
        "relu6",
        "st_relu6({0})",
        "torch.nn.functional.relu6(a)",
        functions=("torch.nn.functional.relu6",),
        modules=("torch.nn.ReLU6",),
        aten=(),
    ),
    _unary(
        "leaky_relu",
        "st_leaky_relu({0}, {slope})",
        "torch.nn.functional.leaky_relu(a, slope)",
        functions=("torch.nn.functional.leaky_relu",),
        modules=("torch.nn.LeakyReLU",),
        params=(_SLOPE,),
    ),
    _unary(
        "elu",
        "st_elu({0}, {alpha})",
        "torch.nn.functional.elu(a, alpha)",
        functions=("torch.nn.functional.elu",),
        modules=("torch.nn.ELU",),
        aten=(),  # aten.elu carries scale and input_scale: capture maps it by hand
        params=(_ALPHA,),
    ),
    _unary(
        "selu",
        "st_selu({0})",
        "torch.selu(a)",
        functions=("torch.selu", "torch.nn.functional.selu"),
        modules=("torch.nn.SELU",),
        aten=(),
    ),
    _unary(
        "gelu",
        "st_gelu({0})",
        "torch.nn.functional.gelu(a)",
        functions=("torch.nn.functional.gelu",),
        modules=("torch.nn.GELU",),
        params=(_APPROX,),
        when=(("approximate", "none"),),
    ),
    _unary(
        "gelu_tanh",
        "st_gelu_tanh({0})",
        "torch.nn.functional.gelu(a, approximate='tanh')",
        functions=("torch.nn.functional.gelu",),
        modules=("torch.nn.GELU",),
        aten=("gelu.default",),
        params=(_APPROX,),
        when=(("approximate", "tanh"),),
    ),
    _unary(
        "sigmoid",
        "st_sigmoid({0})",
        "torch.sigmoid(a)",
        functions=("torch.sigmoid", "torch.nn.functional.sigmoid"),
        methods=("sigmoid",),
        modules=("torch.nn.Sigmoid",),
    ),
    _unary(
        "tanh",
        "st_tanh({0})",
        "torch.tanh(a)",
        functions=("torch.tanh", "torch.nn.functional.tanh"),
        methods=("tanh",),
        modules=("torch.nn.Tanh",),
    ),
    _unary(
        "silu",
        "st_silu({0})",
        "torch.nn.functional.silu(a)",
        functions=("torch.nn.functional.silu",),
        modules=("torch.nn.SiLU",),
    ),
    _unary(
        "mish",
        "st_mish({0})",
        "torch.nn.functional.mish(a)",
        functions=("torch.nn.functional.mish",),
        modules=("torch.nn.Mish",),
    ),
    _unary(
        "hardswish",
        "st_hardswish({0})",
        "torch.nn.functional.hardswish(a)",
        functions=("torch.nn.functional.hardswish",),
        modules=("torch.nn.Hardswish",),
    ),
    _unary(
        "hardsigmoid",
        "st_hardsigmoid({0})",
        "torch.nn.functional.hardsigmoid(a)",
        functions=("torch.nn.functional.hardsigmoid",),
        modules=("torch.nn.Hardsigmoid",),
    ),
    _unary(
        "hardtanh",
        "st_hardtanh({0}, {lo}, {hi})",
        "torch.clamp(a, lo, hi)",
        functions=("torch.nn.functional.hardtanh",),
        modules=("torch.nn.Hardtanh",),
        params=(_HT_LO, _HT_HI),
    ),
    _unary(
        "softplus",
        "st_softplus({0}, {beta}, {threshold})",
        "torch.nn.functional.softplus(a, beta, threshold)",
        functions=("torch.nn.functional.softplus",),
        modules=("torch.nn.Softplus",),
        params=(_BETA, _THRESHOLD),
    ),
    _unary(
        "clamp",
        "st_clamp({0}, {lo}, {hi})",
        "torch.clamp(a, lo, hi)",
        functions=("torch.clamp", "torch.clip"),
        methods=("clamp", "clip", "clamp_"),
        aten=("clamp.default", "clamp_.default"),
        params=(_LO, _HI),
    ),
    _unary(
        "clamp_min",
        "st_clamp_min({0}, {lo})",
        "torch.clamp(a, min=lo)",
        functions=("torch.clamp", "torch.clip", "torch.clamp_min"),
        methods=("clamp", "clip", "clamp_", "clamp_min"),
        aten=("clamp.default", "clamp_min.default", "clamp_.default", "clamp_min_.default"),
        params=(_LO, _HI),
        when=(("hi", NOT_GIVEN),),
    ),
    _unary(
        "clamp_max",
        "st_clamp_max({0}, {hi})",
        "torch.clamp(a, max=hi)",
        functions=("torch.clamp", "torch.clip", "torch.clamp_max"),
        methods=("clamp", "clip", "clamp_", "clamp_max"),
        aten=("clamp.default", "clamp_.default"),
        params=(_LO, Param("hi", None, 2, "max", aten=2)),
        when=(("lo", NOT_GIVEN),),
    ),
    # -- predicates and selection (bool values are 1.f / 0.f in registers) ---------------------
    *(
        _binary(
            name,
            f"({{0}} {op} {{1}} ? 1.f : 0.f)",
            f"torch.{name}(a, b)",
            functions=(f"operator.{name}", f"torch.{name}"),
            methods=(name,),
            aten=(f"{name}.Tensor", f"{name}.Scalar"),
            result="bool",
        )
        for name, op in (
            ("eq", "=="),
            ("ne", "!="),
            ("lt", "<"),
            ("le", "<="),
            ("gt", ">"),
            ("ge", ">="),
        )
    ),
    _unary(
        "logical_not",
        "({0} == 0.f ? 1.f : 0.f)",
        "torch.logical_not(a)",
        functions=("torch.logical_not", "operator.invert", "torch.bitwise_not"),
        methods=("logical_not", "bitwise_not"),
        aten=("logical_not.default", "bitwise_not.default"),
        result="bool",
    ),
    _binary(
        "logical_and",
        "(({0} != 0.f && {1} != 0.f) ? 1.f : 0.f)",
        "torch.logical_and(a, b)",
        functions=("torch.logical_and", "operator.and_"),
        methods=("logical_and",),
        aten=("logical_and.default", "bitwise_and.Tensor"),
        result="bool",
    ),
    _binary(
        "logical_or",
        "(({0} != 0.f || {1} != 0.f) ? 1.f : 0.f)",
        "torch.logical_or(a, b)",
        functions=("torch.logical_or", "operator.or_"),
        methods=("logical_or",),
        aten=("logical_or.default", "bitwise_or.Tensor"),
        result="bool",
    ),
    EwOp(
        "where",
        3,
        "({0} != 0.f ? {1} : {2})",
        "torch.where(a.bool(), b, c)",
        functions=("torch.where",),
        methods=("where",),
        aten=("where.self", "where.ScalarSelf", "where.ScalarOther", "where.Scalar"),
    ),
    # -- ops that read their own coordinates ---------------------------------------------------
    _unary(
        "tril",
        "(({col}) - ({row}) <= {diagonal} ? {0} : 0.f)",
        "torch.tril(a, int(diagonal))",
        functions=("torch.tril",),
        methods=("tril",),
        params=(_DIAG,),
        result="same",
        index=True,
    ),
    _unary(
        "triu",
        "(({col}) - ({row}) >= {diagonal} ? {0} : 0.f)",
        "torch.triu(a, int(diagonal))",
        functions=("torch.triu",),
        methods=("triu",),
        params=(_DIAG,),
        result="same",
        index=True,
    ),
)

EW: dict[str, EwOp] = {op.name: op for op in EW_OPS}

# Modules captured whole (see LeafModule); capture_leaves.py documents the contract.
LEAF_MODULES: list[LeafModule] = [
    LeafModule(
        modules=("torch.nn.RNNBase",),
        capture="stitch_lsp.compiler.worker.recurrent_capture:capture_rnn",
        outputs="stitch_lsp.compiler.worker.recurrent_capture:rnn_outputs",
        note="nn.RNN, nn.LSTM, nn.GRU: one rnn node (recurrent.py emits it)",
    ),
]


@dataclass
class Spellings:
    """Every spelling of the catalog's ops, grouped by kind (built once, torch-free)."""

    functions: dict[str, list[EwOp]] = field(default_factory=dict)
    methods: dict[str, list[EwOp]] = field(default_factory=dict)
    modules: dict[str, list[EwOp]] = field(default_factory=dict)
    aten: dict[str, list[EwOp]] = field(default_factory=dict)


def spellings() -> Spellings:
    s = Spellings()
    for op in EW_OPS:
        for table, names in (
            (s.functions, op.functions),
            (s.methods, op.methods),
            (s.modules, op.modules),
            (s.aten, op.aten),
        ):
            for name in names:
                table.setdefault(name, []).append(op)
    return s
