"""Kokoro's ONNX graph cut for speed at setup: the text-to-features part stays int8; the vocoder (the decoder's
generator, ~90% of the time) is cut twice, its convolutions float 2-D ones (onnxruntime's blocked kernels) in one and
the model's own integer ones in the other (kokoro_tuning.py picks per CPU), its Snake activations fused with the
instance norms before them. It takes its sine source's starting phase and its instance norms' statistics, so a
sentence can be vocoded in windows whose sines run on and which are normalized partly by statistics learned from
whole runs."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np

GRAPH_VERSION = "split 4"  # the files below: bump when they change (setup cuts them again)
# what the vocoder sounds like normalizing by its own statistics (the packs' voiceprints and registered voices depend
# on it: bump when that changes, not when only GRAPH_VERSION does)
SOUND_VERSION = "split 1"
FEATURES, VOCODER, PHASE = "kokoro-features.onnx", "kokoro-vocoder.onnx", "kokoro-phase.onnx"
VOCODER_INT = "kokoro-vocoder-int8.onnx"  # the vocoder with the model's own integer convolutions
FILES = (FEATURES, VOCODER, VOCODER_INT, PHASE)
X = "/decoder/decoder/decode.3/Div_4_output_0"  # the decoder's features, 2 per text frame: [1, 512, n]
F0 = "/encoder/Reshape_output_0"  # predicted F0 at the same rate: [1, n]
DURATIONS = "/encoder/Clip_output_0"  # text frames (2 decoder frames each) of each token, the pads included: [1, t]
_SINE = "/decoder/decoder/generator/m_source/l_sin_gen/"
RAD = _SINE + "Transpose_1_output_0"  # per-harmonic phase increments at the F0 rate: [1, n, 9]
CUMSUM = _SINE + "CumSum_output_0"
PHASE0 = "phase0"  # the vocoder's added input: the sine source's starting phase, in turns [1, 1, 9]
# The vocoder's added inputs and output for its 44 instance norms (AdaIN, the generator's): NORMS, statistics given
# [1, S, 1] (every norm's channel means in graph order, then their variances in the same order); OWN [1, S, 1], the
# weight of each statistic computed over the window against the one given (1: the model as it was, exactly);
# NORMS_OUT what each computed over its window.
NORMS, OWN, NORMS_OUT = "norms", "own_norms", "norms_out"
HOP = 300  # samples of 24 kHz audio per decoder frame
HARMONICS = 9


def _index(graph):
    producer = {o: n for n in graph.node for o in n.output}
    consumers = collections.defaultdict(list)
    for n in graph.node:
        for i in n.input:
            consumers[i].append(n)
    return producer, consumers


def _prune(graph) -> None:
    """Drop the nodes and initializers no output needs."""
    needed, keep = {o.name for o in graph.output}, []
    for node in reversed(list(graph.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    del graph.node[:]
    graph.node.extend(reversed(keep))
    used = {i for n in graph.node for i in n.input}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)


def float_convolutions(model) -> int:
    """Each dynamically quantized 1-D convolution (DynamicQuantizeLinear -> ConvInteger -> bias -> Cast -> scale)
    becomes a float 2-D convolution of height one over the dequantized weights: the same sums without rounding
    the activations to 8 bits, on onnxruntime's faster float kernels. Returns how many were rewritten."""
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer, consumers = _index(graph)
    replaced: dict[str, list] = {}
    added = []
    for conv in graph.node:
        if conv.op_type != "ConvInteger" or conv.input[1] not in inits or conv.input[3] not in inits:
            continue
        (bias_add,) = consumers[conv.output[0]]
        (cast,) = consumers[bias_add.output[0]]
        (scale_mul,) = consumers[cast.output[0]]
        scale_node = producer[scale_mul.input[1]]
        weight_scale = next(i for i in scale_node.input if i in inits)
        step = producer[bias_add.input[1]]  # Reshape(Cast(Floor(Div(bias, scale))))
        while step.op_type != "Div":
            step = producer[step.input[0]]
        x = producer[conv.input[0]].input[0]  # what DynamicQuantizeLinear quantized
        w = numpy_helper.to_array(inits[conv.input[1]]).astype(np.float32)
        zero = numpy_helper.to_array(inits[conv.input[3]]).astype(np.float32)
        w = (w - zero) * numpy_helper.to_array(inits[weight_scale])
        attrs = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
        pads, name = attrs.get("pads", [0, 0]), conv.name.removesuffix("/Conv_quant")
        out = scale_mul.output[0]
        added += [numpy_helper.from_array(w[:, :, None, :].astype(np.float32), f"{name}/weight_f"),
                  numpy_helper.from_array(numpy_helper.to_array(inits[step.input[0]]).astype(np.float32),
                                          f"{name}/bias_f"),
                  numpy_helper.from_array(np.array([2], dtype=np.int64), f"{name}/axis")]
        replaced[scale_mul.name] = [
            helper.make_node("Unsqueeze", [x, f"{name}/axis"], [f"{name}/x4"], name=f"{name}/x4"),
            helper.make_node("Conv", [f"{name}/x4", f"{name}/weight_f", f"{name}/bias_f"], [f"{name}/y4"],
                             name=f"{name}/conv2d",
                             kernel_shape=[1, attrs["kernel_shape"][0]], pads=[0, pads[0], 0, pads[1]],
                             strides=[1, attrs.get("strides", [1])[0]], dilations=[1, attrs.get("dilations", [1])[0]],
                             group=attrs.get("group", 1)),
            helper.make_node("Squeeze", [f"{name}/y4", f"{name}/axis"], [out], name=f"{name}/y"),
        ]
    nodes = [new for n in graph.node for new in replaced.get(n.name, [n])]
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(added)
    _prune(graph)
    return len(replaced)


def fused_snakes(model) -> int:
    """Each instance norm's affine followed by a Snake, y = x + sin(a x)^2 / a on x = g (d / s) + b (d the input less
    its mean, s its deviation), becomes u = d (a g / s) + a b, y = (u + sin(u)^2) / a: the factors are per channel
    ([1, C, 1]), so 6 passes over the tensor instead of 8 (5 once folded_scales takes the last into the convolution
    after it), the same sums up to float rounding. Returns how many."""
    from onnx import helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer, consumers = _index(graph)
    replaced: dict[str, list] = {}
    for sin in graph.node:
        scale = producer.get(sin.input[0])
        if sin.op_type != "Sin" or scale is None or scale.op_type != "Mul":
            continue
        (alpha,) = [i for i in scale.input if i in inits] or [None]
        (x,) = [i for i in scale.input if i != alpha]
        affine = producer.get(x)
        (square,) = consumers[sin.output[0]]
        (over_alpha,) = consumers[square.output[0]]
        (snake,) = consumers[over_alpha.output[0]]
        (reciprocal,) = [i for i in over_alpha.input if i in inits] or [None]
        if alpha is None or reciprocal is None or affine is None or affine.op_type != "Add" or snake.op_type != "Add":
            continue
        gained = next(producer[i] for i in affine.input if i in producer and producer[i].op_type == "Mul")
        beta = next(i for i in affine.input if i != gained.output[0])
        normed = next(producer[i] for i in gained.input if i in producer and producer[i].op_type == "Div")
        gain = next(i for i in gained.input if i != normed.output[0])
        centred, deviation = normed.input  # the Div may stay for other norms' affines (the three resblocks share it)
        name = f"{sin.name}/snake"
        t = {k: f"{name}/{k}" for k in ("g_s", "factor", "shift", "scaled", "u", "sin", "sq", "v")}
        replaced[snake.name] = [
            helper.make_node("Div", [gain, deviation], [t["g_s"]], name=t["g_s"]),
            helper.make_node("Mul", [alpha, t["g_s"]], [t["factor"]], name=t["factor"]),
            helper.make_node("Mul", [alpha, beta], [t["shift"]], name=t["shift"]),
            helper.make_node("Mul", [centred, t["factor"]], [t["scaled"]], name=t["scaled"]),
            helper.make_node("Add", [t["scaled"], t["shift"]], [t["u"]], name=t["u"]),
            helper.make_node("Sin", [t["u"]], [t["sin"]], name=t["sin"]),
            helper.make_node("Mul", [t["sin"], t["sin"]], [t["sq"]], name=t["sq"]),
            helper.make_node("Add", [t["u"], t["sq"]], [t["v"]], name=t["v"]),
            helper.make_node("Mul", [t["v"], reciprocal], [snake.output[0]], name=f"{name}/y"),
        ]
    nodes = [new for n in graph.node for new in replaced.get(n.name, [n])]
    del graph.node[:]
    graph.node.extend(nodes)
    _prune(graph)
    return len(replaced)


def folded_scales(model) -> int:
    """Each per-channel scale (Mul by a [1, C, 1] constant) read only by a float convolution goes into that
    convolution's weights (W[:, c] times the scale of channel c): one pass less. Returns how many."""
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer, consumers = _index(graph)
    rewired = {}
    for conv in graph.node:
        unsqueeze = producer.get(conv.input[0])
        mul = producer.get(unsqueeze.input[0]) if unsqueeze is not None and unsqueeze.op_type == "Unsqueeze" else None
        if conv.op_type != "Conv" or mul is None or mul.op_type != "Mul" or conv.input[1] not in inits \
                or len(consumers[mul.output[0]]) != 1 or len(consumers[conv.input[1]]) != 1:
            continue
        (scale,) = [i for i in mul.input if i in inits] or [None]
        grouped = any(a.name == "group" and a.i != 1 for a in conv.attribute)
        if scale is None or len(inits[scale].dims) != 3 or grouped:
            continue
        weight = numpy_helper.to_array(inits[conv.input[1]])
        factor = numpy_helper.to_array(inits[scale]).reshape(1, -1, 1, 1)
        if factor.shape[1] != weight.shape[1]:
            continue
        inits[conv.input[1]].CopyFrom(numpy_helper.from_array((weight * factor).astype(np.float32), conv.input[1]))
        rewired[mul.output[0]] = next(i for i in mul.input if i != scale)
    for node in graph.node:
        node.input[:] = [rewired.get(i, i) for i in node.input]
    _prune(graph)
    return len(rewired)


def with_start_phase(model) -> None:
    """Add the PHASE0 input to the sine source's accumulated phase (turns), right after its CumSum."""
    from onnx import TensorProto, helper

    graph = model.graph
    shifted = CUMSUM + "_from_phase0"
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name == CUMSUM:
                node.input[k] = shifted
    graph.input.append(helper.make_tensor_value_info(PHASE0, TensorProto.FLOAT, [1, 1, HARMONICS]))
    nodes = list(graph.node)
    at = next(k for k, n in enumerate(nodes) if CUMSUM in n.output)
    nodes.insert(at + 1, helper.make_node("Add", [CUMSUM, PHASE0], [shifted], name=_SINE + "phase0"))
    del graph.node[:]
    graph.node.extend(nodes)


def _instance_norms(graph) -> list[tuple[Any, Any]]:
    """The generator's instance norms as (mean node, variance node): ReduceMean(x) and ReduceMean_2((x - mean)^2)."""
    nodes = {n.name: n for n in graph.node}
    means = [n for n in graph.node if n.op_type == "ReduceMean" and "/generator/" in n.name
             and not n.name.endswith("_2")]
    return [(m, nodes[m.name + "_2"]) for m in means]


def _channels(model, outputs: list[str]) -> list[int]:
    """The channel count of each of `outputs` ([1, C, 1]; shape inference gives none): one tiny run."""
    import onnx
    import onnxruntime

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(o) for o in outputs)
    session = onnxruntime.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    frames = 8
    feeds = {X: np.zeros((1, 512, frames), np.float32), F0: np.full((1, frames), 100.0, np.float32),
             "style": np.zeros((1, 256), np.float32), PHASE0: np.zeros((1, 1, HARMONICS), np.float32)}
    return [int(a.shape[1]) for a in session.run(outputs, feeds)]


def with_given_norms(model) -> None:
    """Add NORMS, OWN and NORMS_OUT: each instance norm normalizes by OWN times its statistics plus 1 - OWN times
    those given (NORMS is [1, S, 1]: S twice the norms' channels)."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    pairs = _instance_norms(graph)
    means = _channels(model, [m.output[0] for m, _ in pairs])
    total = sum(means)
    axis = numpy_helper.from_array(np.array([1], np.int64), f"{NORMS}/axis")
    one = numpy_helper.from_array(np.array(1.0, np.float32), f"{NORMS}/one")
    inits, slices, chosen, offset = [axis, one], [], {}, 0
    for k, stat in enumerate([m for m, _ in pairs] + [v for _, v in pairs]):
        width = means[k % len(pairs)]
        bounds = [numpy_helper.from_array(np.array([at], np.int64), f"{NORMS}/{k}/{end}")
                  for at, end in ((offset, "start"), (offset + width, "end"))]
        inits += bounds
        given, own, used = (f"{stat.output[0]}/{what}" for what in ("given", "own", "used"))
        slices += [helper.make_node("Slice", [whole, bounds[0].name, bounds[1].name, axis.name], [part],
                                    name=part) for whole, part in ((NORMS, given), (OWN, own))]
        chosen[stat.name] = [  # own * computed + (1 - own) * given: exactly the computed where own is 1
            helper.make_node("Mul", [own, stat.output[0]], [f"{used}/own"], name=f"{stat.name}/own"),
            helper.make_node("Sub", [f"{NORMS}/one", own], [f"{used}/rest"], name=f"{stat.name}/rest"),
            helper.make_node("Mul", [f"{used}/rest", given], [f"{used}/given"], name=f"{stat.name}/given_part"),
            helper.make_node("Add", [f"{used}/own", f"{used}/given"], [used], name=f"{stat.name}/used")]
        offset += width
    rewired = {blend[0].input[1]: blend[-1].output[0] for blend in chosen.values()}  # computed -> chosen
    for node in graph.node:  # each norm's consumers read the statistic chosen
        node.input[:] = [rewired.get(name, name) for name in node.input]
    nodes = slices + [new for n in graph.node for new in ([n, *chosen[n.name]] if n.name in chosen else [n])]
    nodes.append(helper.make_node("Concat", list(rewired), [NORMS_OUT], name=NORMS_OUT, axis=1))
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(inits)
    graph.input.extend([helper.make_tensor_value_info(NORMS, TensorProto.FLOAT, [1, 2 * total, 1]),
                        helper.make_tensor_value_info(OWN, TensorProto.FLOAT, [1, 2 * total, 1])])
    graph.output.append(helper.make_tensor_value_info(NORMS_OUT, TensorProto.FLOAT, [1, 2 * total, 1]))


def vocoder(model, integer: bool = False):
    """The joined model's vocoder (X, F0, style, PHASE0, NORMS, OWN -> audio, NORMS_OUT), its Snakes fused, its
    convolutions float unless `integer`."""
    from onnx.utils import Extractor

    part = Extractor(model).extract_model([X, F0, "style"], ["audio"])
    with_start_phase(part)
    fused_snakes(part)
    if not integer:
        float_convolutions(part)
        folded_scales(part)
    with_given_norms(part)
    return part


def build(model_path: Path, where: Path) -> None:
    """Write FEATURES (tokens, style, speed -> X, F0, DURATIONS), VOCODER and VOCODER_INT (vocoder()) and PHASE
    (F0 -> RAD)
    from the joined model into `where`."""
    import onnx
    from onnx.utils import Extractor

    model = onnx.load(str(model_path))
    parts = {FEATURES: Extractor(model).extract_model(["tokens", "style", "speed"], [X, F0, DURATIONS]),
             PHASE: Extractor(model).extract_model([F0], [RAD]),
             VOCODER: vocoder(model), VOCODER_INT: vocoder(model, integer=True)}
    for name, proto in parts.items():
        onnx.checker.check_model(proto)
        tmp = where / f"{name}.part"
        onnx.save(proto, str(tmp))
        tmp.replace(where / name)
