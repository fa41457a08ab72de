"""Output adapters: a benchmark program's stdout/stderr text -> typed results (pure parsers).

farm's own kernels speak its JSON Lines contract; an external program (TensorFlow Lite's
benchmark_model, MNN's or ncnn's tools, a lab's own binary) prints whatever it prints. An
adapter turns that text into a ProgramOutput, or raises OutputError with one reason. It never
returns an empty result: output with nothing usable is a failure that says why.

    from farm.adapters import AdapterName, RegexSpec, adapter_for

    output = adapter_for(AdapterName.TFLITE).parse(stdout, stderr)
    output.granularity          # Granularity.PER_ITERATION | Granularity.SUMMARY
    output.latencies_ms         # one per measured iteration (PER_ITERATION), else ()
    output.iterations           # farm.analysis.iterations.Iterations on the phone's clock (jsonl)
    output.metrics              # tuple[Metric]: what the program reported about itself
    output.inferences           # int | None: for energy per inference
    output.missing, output.notes

    spec = RegexSpec.model_validate({"patterns": [r"took (?P<t>[0-9.]+) ms"],
                                     "metrics": {"t": {"name": "latency", "unit": "ms"}},
                                     "latency": "t"})
    adapter_for(AdapterName.REGEX, regex=spec).parse(stdout, stderr)

    except OutputError as error: error.reason (FailureReason: EMPTY, TRUNCATED, MALFORMED,
        NO_METRIC, PROGRAM_ERROR), error.detail; str(error) is one line:
        "tflite output: truncated output: 1 timing lines and no 'Inference timings' summary: ..."

The adapters (each module's docstring gives its format): `jsonl` (farm.adapters.jsonl),
`tflite` (farm.adapters.tflite), `regex` (farm.adapters.regex), `llama_bench` (llama.cpp's
llama-bench -o jsonl: prefill/decode/first-token metrics, farm.adapters.llama_bench). Metric
names carry their unit and,
where they mean the same thing, are the names farm computes from iterations (latency_mean_ms,
latency_p90_ms, iterations_measured), so a summary-only run sits in the same report columns;
jsonl keeps the program's own `result` numbers as program_<key>, since farm computes the
latency statistics itself from the iterations.

Why a package of its own: the engine (after a run) and the experiment spec (validating an
`output:` section, holding a RegexSpec) both need the adapters, so they sit below both. They are
not telemetry (which reads the phone's sensors: sampler traces, Trepn) and not analysis (which
computes statistics from values already parsed); analysis is what they build on.
"""

from farm.adapters.jsonl import parse_event_lines, parse_jsonl
from farm.adapters.llama_bench import parse_llama_bench
from farm.adapters.output import FailureReason, Granularity, OutputError, ProgramOutput
from farm.adapters.regex import RegexMetric, RegexSpec, Stream, parse_regex
from farm.adapters.registry import AdapterName, OutputAdapter, adapter_for
from farm.adapters.tflite import parse_tflite

__all__ = [
    "AdapterName",
    "FailureReason",
    "Granularity",
    "OutputAdapter",
    "OutputError",
    "ProgramOutput",
    "RegexMetric",
    "RegexSpec",
    "Stream",
    "adapter_for",
    "parse_event_lines",
    "parse_jsonl",
    "parse_llama_bench",
    "parse_regex",
    "parse_tflite",
]
