"""`python -m core predict`: an experiment's points, your own model, the catalogue; and its errors."""
import json
import warnings

import pytest
import torch

from core import devices, settings
from core.predict import ownmodel, uncertainty
from core.model import profiles
from core.measure import page_faults, standin
from core.measure.kernels import cpu_rnn
from core.present import tables
from core.present.tables import seconds_text
from core.commands.cli import main

MODEL_FILE = '''
import torch

def build():
    return torch.nn.Sequential(torch.nn.Linear(84, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

def broken():
    raise RuntimeError("no weights here")

def bare():
    return torch.nn.ReLU()

class Attention(torch.nn.Module):  # a projection, then causal self-attention over 4 heads
    def __init__(self):
        super().__init__()
        self.project = torch.nn.Linear(32, 32)

    def forward(self, x):
        q = self.project(x).view(x.shape[0], x.shape[1], 4, 8).transpose(1, 2)
        return torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)

def attention():
    return Attention()

def not_a_model():
    return 42

class Tagger(torch.nn.Module):  # token ids in, a tag per token out
    def __init__(self):
        super().__init__()
        self.embed, self.lstm, self.out = torch.nn.Embedding(1000, 16), torch.nn.LSTM(16, 32), torch.nn.Linear(32, 5)

    def forward(self, ids):
        return self.out(self.lstm(self.embed(ids))[0])

def tagger():
    return Tagger()

def exits():
    raise SystemExit(0)

class Counts(torch.nn.Module):  # its forward returns a number, not a tensor
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(84, 1)

    def forward(self, x):
        return 5

def counts():
    return Counts()

def in_place():
    return torch.nn.ReLU(inplace=True)

def normalised():  # BatchNorm trains on 2 samples or more: the crossover sweep starts at batch 2
    return torch.nn.Sequential(torch.nn.Linear(84, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 1))
'''


SHIPPED_PROFILE = next((settings.APP_ROOT / "results").glob("*/calibration/profile.json"))


@pytest.fixture
def calibrated(results_dir):
    """A calibrated CPU profile (the shipped one's figures) as this machine's, in the test's results folder."""
    profile = json.loads(SHIPPED_PROFILE.read_text())
    profile["machine_id"] = profile["fingerprint"]["machine_id"] = devices.fingerprint()["machine_id"]
    profiles.save(profile | {"gpus": {}})
    return results_dir


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "mymodel.py"
    path.write_text(MODEL_FILE)
    return path


def test_list_prints_the_catalogue_with_sources_counted(capsys):
    assert main(["predict", "--on", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {row["name"] for row in rows}
    assert {"t4", "k80"} <= names and {row["kind"] for row in rows} >= {"cpu", "gpu"}


def test_the_catalogue_as_text_is_a_table_with_a_header(capsys):
    assert main(["predict", "--on", "list"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:4] == ["name", "title", "kind", "origin"] and "assumptions" in header
    t4 = next(line for line in lines if line.startswith("t4 "))
    assert "catalogue" in t4 and "GFLOP/s" in t4


@pytest.mark.full
def test_an_experiment_on_a_gpu_gives_a_json_array_per_point(capsys, calibrated):
    assert main(["predict", "matmul", "--on", "t4", "--preset", "smoke", "--set", "sizes=8", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    variants = {entry["variant"] for entry in found}
    assert "torch resident" in variants and "h2d pinned" in variants and "numpy" not in variants
    for entry in found:
        assert {"device", "variant", "params", "predicted_s"} <= set(entry)
        assert entry["params"] == {"size": 8} and entry["predicted_s"] > 0
        assert sum(entry["parts"].values()) == pytest.approx(entry["predicted_s"])


@pytest.mark.full
def test_each_point_s_census_is_taken_once_for_every_gpu_and_once_for_every_cpu(capsys, calibrated, monkeypatch):
    taken = []
    entry = standin.entry
    monkeypatch.setattr(standin, "entry", lambda exp, point, config: taken.append(
        (point.device, point.variant, json.dumps(point.params))) or entry(exp, point, config))
    assert main(["predict", "matmul", "--on", "t4", "--on", "this", "--on", "a100-40gb-pcie", "--on", "typical-cpu",
                 "--preset", "smoke", "--set", "sizes=8", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    on_gpus = [entry for entry in found if entry["device"] in ("t4", "a100-40gb-pcie")]
    on_cpus = [entry for entry in found if entry not in on_gpus]
    assert len(taken) == len(set(taken)) == len(on_gpus) / 2 + len(on_cpus) / 2  # one census a point, 2 targets each
    t4 = {entry["variant"]: entry["predicted_s"] for entry in on_gpus if entry["device"] == "t4"}
    a100 = {entry["variant"]: entry["predicted_s"] for entry in on_gpus if entry["device"] == "a100-40gb-pcie"}
    assert t4.keys() == a100.keys() and t4 != a100  # the same censuses, priced on each GPU


def test_an_experiment_on_this_machine_prints_each_point(capsys, calibrated):
    assert main(["predict", "matmul", "--on", "this", "--preset", "smoke", "--set", "sizes=8,16",
                 "--set", "variants=torch cpu"]) == 0
    out = capsys.readouterr().out
    assert "predicted on this machine's CPU" in out
    assert "torch cpu size=8:" in out and "torch cpu size=16:" in out and " per " in out


def test_a_cpu_point_is_predicted_once_whatever_thread_settings_the_run_would_time(capsys, calibrated):
    # a run times each CPU point at each cpu_threads setting; the model prices the threads its figures were timed with
    assert main(["predict", "matmul", "--on", "this", "--preset", "smoke", "--set", "sizes=8",
                 "--set", "variants=torch cpu", "--set", "cpu_threads=default,1,7"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("torch cpu size=8:")]
    assert len(lines) == 1


@pytest.mark.full
def test_each_targets_lines_are_printed_before_the_next_targets_census_is_taken(capsys, calibrated, monkeypatch):
    from core.predict import predictions
    printed_before = []
    predict = predictions.predict_points
    monkeypatch.setattr(predictions, "predict_points", lambda *args, **kwargs: printed_before.append(
        capsys.readouterr().out) or predict(*args, **kwargs))
    assert main(["predict", "matmul", "--on", "this", "--on", "t4", "--preset", "smoke", "--set", "sizes=8"]) == 0
    assert printed_before[0] == "" and "predicted on this machine's CPU:" in printed_before[1]
    assert "predicted on T4 driven by this machine's CPU:" in capsys.readouterr().out


def test_bad_hardware_is_a_clean_error_and_a_missing_profile_a_note(capsys, results_dir):
    assert main(["predict", "matmul", "--on", "nosuchgpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "nosuchgpu" in err and "t4" in err.lower()
    assert main(["predict", "matmul", "--on", "this", "--preset", "smoke", "--set", "sizes=16",
                 "--set", "variants=numpy"]) == 0  # no profile here: the nearest CPU stands in, and the note says so
    printed = capsys.readouterr()
    note = next(line for line in printed.err.splitlines() if line.startswith("note: "))
    assert "another CPU's" in note and "python -m core calibrate" in note
    assert "predicted on a typical desktop CPU (assumed):" in printed.out


@pytest.mark.full
def test_your_own_model_is_predicted_with_its_crossover(capsys, calibrated, model_file):
    assert main(["predict", "--model", f"{model_file}:build", "--input", "512x84", "--train", "--on", "this",
                 "--on", "t4"]) == 0
    out = capsys.readouterr().out
    assert "one training step" in out and "512x84" in out
    assert "this machine's CPU:" in out and "T4" in out and "batch" in out
    assert main(["predict", "--model", f"{model_file}:build", "--input", "64x84", "--on", "this", "--on", "t4",
                 "--json"]) == 0
    cpu, gpu = json.loads(capsys.readouterr().out)
    assert cpu["variant"] == "forward" and cpu["params"] == {"input": "64x84"} and "crossover_batch" not in cpu
    assert "crossover_batch" in gpu and gpu["parts"]["copies"] > 0
    # the report gives the same time in its own unit (a long one in s, where 8.92e+03 ms was printed)
    assert main(["predict", "--model", f"{model_file}:build", "--input", "64x84", "--on", "this"]) == 0
    assert f"this machine's CPU: {tables.seconds_text(cpu['predicted_s'])} (" in capsys.readouterr().out


def test_your_own_model_s_times_carry_the_model_s_error_and_a_gpu_its_speedup_verdict(capsys, calibrated, model_file):
    argv = ["predict", "--model", f"{model_file}:build", "--input", "64x84", "--on", "this", "--on", "t4"]
    assert main(argv) == 0  # no saved error bands in the test's results folder: no range, no verdict either way
    out = capsys.readouterr().out
    assert "no measured error to range it" in out and uncertainty.NO_RANGE in out
    # predicted 0.5 to 2 times what such points measured, on either kind of device
    uncertainty.save([uncertainty.Band(kind, "any", 0.5, 2.0, 10) for kind in ("cpu", "cuda")])
    assert main([*argv, "--json"]) == 0
    cpu, gpu = json.loads(capsys.readouterr().out)
    assert cpu["likely_s"] == [pytest.approx(cpu["predicted_s"] / 2), pytest.approx(cpu["predicted_s"] * 2)]
    speedup = cpu["predicted_s"] / gpu["predicted_s"]  # its range: a quarter of it to four times it
    assert gpu["speedup"]["speedup"] == pytest.approx(speedup)
    assert (gpu["speedup"]["low"], gpu["speedup"]["high"]) == (pytest.approx(speedup / 4), pytest.approx(speedup * 4))
    assert gpu["speedup"]["verdict"] == (uncertainty.HELPS if speedup > 4 else uncertainty.DOES_NOT if speedup < 0.25
                                         else uncertainty.TOO_CLOSE)
    assert main(argv) == 0
    assert f"{gpu['speedup']['verdict']}: " in capsys.readouterr().out


def test_your_own_attention_is_priced_on_the_host_s_flash_attention_blocks_or_said_to_be_estimated(capsys, calibrated,
                                                                                                     model_file):
    argv = ["predict", "--model", f"{model_file}:attention", "--input", "8x64x32", "--on", "this"]
    profile = profiles.load()
    for field in profiles.ATTENTION_FIGURES:  # as a profile calibrated before calibrate timed the blocks
        del profile["cpu"][field]
    profiles.save(profile)
    assert main(argv) == 0
    assert ("Note: flash attention is priced as its blocks' GEMMs and an exp per score, an estimate: this machine's "
            "CPU has no flash_attention_seconds") in capsys.readouterr().out
    # 10 us a block of 32 rows by 32 keys at head size 8, in proportion to each
    grid = {f"{q}x{k}x{d}": 1e-5 * q / 32 * k / 32 * d / 8 for q in (32, 64) for k in (32, 512) for d in (8, 32)}
    profile["cpu"] |= dict.fromkeys(profiles.ATTENTION_FIGURES, grid)
    profiles.save(profile)
    assert main([*argv, "--json"]) == 0
    [cpu] = json.loads(capsys.readouterr().out)
    assert cpu["notes"] == []
    # 8 x 4 heads of two 32-row blocks against 64 keys (between 32 and 512 in logs, in proportion: 20 us) at head
    # size 8: 1,280 us of flash attention beside the projection's GEMM
    assert 1.28e-3 < cpu["parts"]["compute"] < 1.28e-3 * 1.2


@pytest.mark.full
def test_your_own_model_is_timed_here_beside_its_prediction_with_check(capsys, calibrated, model_file, monkeypatch):
    monkeypatch.setattr(ownmodel, "MEASURE_SECONDS", 0.05)
    argv = ["predict", "--model", f"{model_file}:build", "--input", "64x84", "--on", "this", "--on", "t4", "--check"]
    assert main([*argv, "--json"]) == 0
    cpu, gpu = json.loads(capsys.readouterr().out)
    assert cpu["device"] == "this" and cpu["measured_s"] > 0 and cpu["measured_iqr_s"] >= 0
    assert cpu["measured_blocks"] >= 1 and cpu["calls_per_block"] >= 1 and cpu["threads"] == torch.get_num_threads()
    assert "measured_s" not in gpu  # a GPU is predicted, never measured here
    assert cpu["measured_page_faults"] >= 0  # counted (Linux)
    assert main(["predict", "--model", f"{model_file}:tagger", "--input", "8x20:int64", "--train", "--check",
                 "--on", "this"]) == 0  # indices are timed on zeros, a valid index into any table
    out = capsys.readouterr().out
    assert "one training step (forward, mean loss, backward, Adam) on input 8x20:int64, predicted, and measured on" in out
    assert "; measured here " in out and " threads): predicted/measured " in out
    assert main(["predict", "--model", f"{model_file}:build", "--input", "8x84", "--check", "--host", "typical-cpu"]) == 2
    assert "--check: times your model on this machine's CPU" in capsys.readouterr().err
    # an input that would not fit is refused before anything is allocated: 2^31 floats are 8 GiB
    monkeypatch.setattr(ownmodel.psutil, "virtual_memory", lambda: type("Free", (), {"available": 2**33})())
    assert main(["predict", "--model", f"{model_file}:build", "--input", "25565282x84", "--check", "--on", "this"]) == 2
    assert ("--check: an input of 25565282x84 alone takes 8.0 GiB, over 50% of the 8.0 GiB this machine has free"
            in capsys.readouterr().err)


def measured(times: list[float]):
    """A check's timing of one call a block, as torch.utils.benchmark reports it."""
    from torch.utils import benchmark
    return benchmark.Measurement(number_per_run=1, raw_times=times, task_spec=benchmark.TaskSpec("call()", "",
                                                                                                  num_threads=1))


def test_a_noisy_check_says_so_and_to_time_it_again(capsys, calibrated, model_file, monkeypatch):
    argv = ["predict", "--model", f"{model_file}:build", "--input", "64x84", "--on", "this", "--check"]
    monkeypatch.setattr(ownmodel, "measure", lambda *args: ownmodel.Checked(measured([1e-3, 1e-3, 1.01e-3, 0.1, 0.1]),
                                                                            0.0))
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["measured_noisy"] is True
    assert main(argv) == 0
    assert "noisy (IQR 9802% of the median): time it again when the machine is idle" in capsys.readouterr().out
    monkeypatch.setattr(ownmodel, "measure", lambda *args: ownmodel.Checked(measured([1e-3, 1e-3, 1.01e-3, 1.02e-3,
                                                                                      1e-3]), 0.0))
    assert main(argv) == 0
    assert "noisy" not in capsys.readouterr().out


def test_a_check_whose_calls_fault_pages_says_how_many_and_what_they_cost_here(capsys, calibrated, model_file,
                                                                             monkeypatch):
    timed = measured([1e-3] * 5)
    argv = ["predict", "--model", f"{model_file}:build", "--input", "64x84", "--on", "this", "--check"]
    monkeypatch.setattr(ownmodel, "measure", lambda *args: ownmodel.Checked(timed, 2000.0))
    profile = profiles.load()
    # the largest add at 1e8 elements a second: 10 ns an element, of which 1 ns in cache (1e9) and 1 ns its 12 bytes
    # streamed (1.2e10 B/s): 8 ns for faulting 4 bytes in, 2 ns a byte, 8.192 us a 4,096-byte page
    profile["cpu"] |= {"elementwise_rate": {"4096": 1e9, "1048576": 1e9, "16777216": 1e8}, "memory_bandwidth": 1.2e10}
    profiles.save(profile)
    assert main([*argv, "--json"]) == 0
    [cpu] = json.loads(capsys.readouterr().out)
    assert cpu["measured_page_faults"] == 2000.0
    assert cpu["measured_page_fault_s"] == pytest.approx(2000 * 2e-9 * page_faults.PAGE_BYTES)
    assert main(argv) == 0
    assert (f"; each call took 2,000 page faults (memory the allocator mapped afresh: about "
            f"{seconds_text(2000 * 2e-9 * page_faults.PAGE_BYTES)} of each call at this machine's cost of a fault, "
            f"which the prediction counts only for tensors of 32 MiB or more)") in capsys.readouterr().out
    monkeypatch.setattr(ownmodel, "measure", lambda *args: ownmodel.Checked(timed, 50.0))  # a few: not worth a word
    assert main(argv) == 0
    assert "page faults" not in capsys.readouterr().out


@pytest.mark.full
def test_your_own_model_on_a_gpu_alone_is_also_predicted_on_the_cpu_that_drives_it(capsys, calibrated, model_file):
    assert main(["predict", "--model", f"{model_file}:build", "--input", "64x84", "--on", "t4", "--json"]) == 0
    cpu, gpu = json.loads(capsys.readouterr().out)
    assert (cpu["device"], gpu["device"]) == ("this", "t4") and "crossover_batch" not in cpu
    assert gpu["crossover_against"] == "this machine's CPU"
    assert main(["predict", "--model", f"{model_file}:build", "--input", "64x84", "--on", "t4"]) == 0
    out = capsys.readouterr().out
    assert "  this machine's CPU: " in out and "faster than this machine's CPU" in out


def test_your_own_model_on_cpus_alone_says_nothing_of_a_gpu(capsys, calibrated, model_file):
    assert main(["predict", "--model", f"{model_file}:build", "--input", "64x84", "--on", "this"]) == 0
    out = capsys.readouterr().out
    assert "  this machine's CPU: " in out and "GPU" not in out and "crossover" not in out


@pytest.mark.full
def test_your_own_model_may_take_indices(capsys, calibrated, model_file):
    assert main(["predict", "--model", f"{model_file}:tagger", "--input", "8x20:int64", "--on", "t4", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [entry["device"] for entry in found] == ["this", "t4"]
    assert all(entry["params"] == {"input": "8x20:int64"} and entry["predicted_s"] > 0 for entry in found)


@pytest.mark.parametrize("on_gpu, fused", [(False, "aten.mkldnn_rnn_layer"), (True, "aten._cudnn_rnn")])
def test_your_own_lstm_is_counted_as_the_device_runs_it(model_file, on_gpu, fused):
    if not (on_gpu or cpu_rnn.runs_lstm()):
        pytest.skip("this torch runs a CPU LSTM step by step (no oneDNN)")
    spec = f"{model_file}:tagger"
    found = ownmodel.take(ownmodel.load(spec), ownmodel.parse_input("8x20:int64"), False, on_gpu)
    names = {op["op"] for op in found["ops"]}
    assert fused in names and "aten.embedding" in names and "aten.sigmoid_" not in names


def test_your_own_model_s_forward_is_inference_and_its_training_step_trains(tmp_path):
    path = tmp_path / "dropping.py"
    path.write_text("import torch\n\ndef build():\n    return torch.nn.Sequential(torch.nn.Linear(8, 8), "
                    "torch.nn.Dropout(0.5))\n")
    model, given = ownmodel.load(f"{path}:build"), ownmodel.parse_input("4x8")
    assert "aten.bernoulli_" not in {op["op"] for op in ownmodel.take(model, given, False, False)["ops"]}
    assert "aten.bernoulli_" in {op["op"] for op in ownmodel.take(model, given, True, False)["ops"]}


@pytest.mark.full
def test_a_compiled_model_is_predicted_as_its_eager_operations_and_says_so(capsys, calibrated, tmp_path):
    path = tmp_path / "compiled.py"
    path.write_text("import torch\n\ndef build():\n    return torch.compile(torch.nn.Linear(8, 1))\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["predict", "--model", f"{path}:build", "--input", "4x8", "--on", "this"]) == 0
    assert not [w for w in caught if "hooks" in str(w.message)]  # the census's module hooks ran on the module alone
    out = capsys.readouterr().out
    assert "this machine's CPU: " in out and "predicted as its eager operations" in out


@pytest.mark.parametrize("argv, message", [
    (["--model", "{file}:nothing", "--input", "8x84"], "has no function nothing"),
    (["--model", "{file}:broken", "--input", "8x84"], "broken() raised RuntimeError: no weights here"),
    (["--model", "{file}:not_a_model", "--input", "8x84"], "returned a value of type int, not a torch.nn.Module"),
    (["--model", "{file}:build", "--input", "8x3"], "one forward on input 8x3 (run at 2x3"),
    # PyTorch's message names the check's batch: the message says so
    (["--model", "{file}:build", "--input", "512x3"], "one forward on input 512x3 (run at 2x3, a check that the model "
                                                      "runs) failed"),
    (["--model", "{file}:bare", "--input", "8x84", "--train"], "--train: the model has no trainable parameters"),
    (["--model", "{file}:build", "--input", "8xx84"], "--input: '8xx84' is not a shape"),
    (["--model", "{file}:build", "--input", "0x84"], "every size must be >= 1"),
    (["--model", "{file}:build"], "--input: give the input's shape"),
    (["--model", "missing.py:build", "--input", "8x84"], "is not a Python file here"),
    (["--model", "{file}", "--input", "8x84"], "is not path/to/file.py:build_fn"),
    (["matmul", "--input", "8x84"], "--input: goes with --model only"),
    (["matmul", "--check"], "--check: goes with --model only"),
    (["--model", "{file}:tagger", "--input", "8x20"], "wants an integer input: --input 8x20:int64"),
    (["--model", "{file}:build", "--input", "8x84:float16"], "not one of float32, int64, int32 (half precision"),
    (["--model", "{file}:build", "--input", "8x84:int8"], "the element type 'int8' is not one of float32, int64"),
    ([], "name an experiment"),
    (["--model", "{file}:build", "--input", "8x84:int64"], "one forward on input 8x84:int64 (run at 2x84:int64, a "
                                                               "check that the model runs) failed: RuntimeError"),
    (["--model", "{file}:exits", "--input", "8x84"], "exits() raised SystemExit: 0"),
    (["--model", "{file}:counts", "--input", "8x84", "--train"], "the model's output is a int: a training step needs"),
    (["--model", "{file}:build", "--input", "²x84"], "--input: '²x84' is not a shape"),
    (["--model", "{file}:build", "--input", "1x" + "9" * 5000], "is not a shape such as 512x84"),
    (["--model", "", "--input", "8x84"], "--model: '' is not path/to/file.py:build_fn"),
    (["--model", "{file}:build", "--input", "8x84", "--accuracy"],
     "--model: --accuracy and --model are two jobs: give one of them"),
    (["--model", "{file}:build", "--input", "8x84", "--preset", "paper"], "--preset: --model predicts your own model"),
    (["matmul", "--accuracy"], "experiment: --accuracy takes no other option than --json"),
    (["--writeups", "--set", "sizes=8"], "--set: --writeups takes no other option than --json"),
    (["--on", "list", "--on", "t4"], "--on: 'list' lists the catalogue: give it alone"),
])
def test_model_errors_name_the_field(capsys, calibrated, model_file, argv, message):
    argv = [a.replace("{file}", str(model_file)) for a in argv]
    assert main(["predict", *argv, "--on", "this"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.full
def test_host_without_on_is_refused_where_it_would_drive_nothing(capsys, calibrated):
    assert main(["predict", "matmul", "--host", "typical-cpu", "--preset", "smoke"]) == 2
    assert "--host: drives the GPUs named with --on: give --on too" in capsys.readouterr().err
    assert main(["predict", "matmul", "--host", "typical-cpu", "--on", "t4", "--preset", "smoke", "--set",
                 "sizes=8"]) == 0
    assert "T4 driven by a typical desktop CPU" in capsys.readouterr().out


@pytest.mark.full
def test_a_batch_the_model_cannot_take_is_left_out_of_the_crossover_sweep(capsys, calibrated, model_file):
    assert main(["predict", "--model", f"{model_file}:normalised", "--input", "64x84", "--train", "--on", "t4",
                 "--json"]) == 0
    gpu = next(entry for entry in json.loads(capsys.readouterr().out) if entry["device"] == "t4")
    assert gpu["predicted_s"] > 0 and "crossover_batch" in gpu


@pytest.mark.full
def test_your_own_model_too_large_for_a_gpu_s_memory_is_said_not_to_fit_there(capsys, calibrated, model_file):
    # 100,000,000 rows of 84 float32: 31.3 GiB of input alone, more than a T4's 16 GiB, less than an H100's 80
    argv = ["predict", "--model", f"{model_file}:build", "--input", "100000000x84", "--on", "t4", "--on", "h100-sxm"]
    assert main([*argv, "--json"]) == 0
    found = {entry["device"]: entry for entry in json.loads(capsys.readouterr().out)}
    t4, h100 = found["t4"], found["h100-sxm"]
    assert t4["memory_gib"] == 16 and h100["memory_gib"] == 80
    assert t4["memory_needed_gib"] == h100["memory_needed_gib"] >= 100_000_000 * 84 * 4 / 2**30
    assert t4["fits"] is False and h100["fits"] is True
    assert main(argv) == 0
    out = capsys.readouterr().out
    needed = f"{t4['memory_needed_gib']:,.4g} GiB"  # the input, which the first Linear takes whole: 31.29
    assert "T4 driven by this machine's CPU" in out and f"would not fit: one call needs at least {needed}" in out
    assert "and it has 16 GiB" in out
    assert [line.split(":")[0] for line in out.splitlines() if "driven by" in line and "would not fit" in line] == [
        "  T4 driven by this machine's CPU"]  # the H100's line has room


def test_your_own_model_too_large_for_this_machine_s_memory_is_said_not_to_fit_here(capsys, calibrated, model_file,
                                                                                    monkeypatch):
    import types
    monkeypatch.setattr(ownmodel.psutil, "virtual_memory", lambda: types.SimpleNamespace(total=8 * 2**30,
                                                                                        available=6 * 2**30))
    argv = ["predict", "--model", f"{model_file}:build", "--input", "100000000x84", "--on", "this", "--on", "typical-cpu"]
    assert main([*argv, "--json"]) == 0
    here, typical = json.loads(capsys.readouterr().out)
    assert here["fits"] is False and here["memory_gib"] == 8 and here["memory_needed_gib"] > 31
    assert "fits" not in typical  # a catalogue CPU's memory is not known
    assert main(argv) == 0
    assert "this machine's CPU: " in (out := capsys.readouterr().out) and "and it has 8 GiB" in out


@pytest.mark.full
def test_the_crossover_sweep_compares_only_the_batches_that_fit_in_the_gpu_s_memory(capsys, calibrated, model_file,
                                                                                  monkeypatch):
    # a ReLU over rows of 2,000,000 float32 (8 MB): it takes them whole, so a T4's 16 GiB holds 2,147 rows
    argv = ["predict", "--model", f"{model_file}:bare", "--input", "1x2000000", "--on", "t4"]
    assert main([*argv, "--json"]) == 0
    t4 = next(entry for entry in json.loads(capsys.readouterr().out) if entry["device"] == "t4")
    assert t4["fits"] is True and t4["crossover_up_to"] == 2048
    monkeypatch.setattr(ownmodel, "memory_needed", lambda model, found, train: 2.0**60)  # no batch fits
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "would not fit" in out and "no batch of the crossover sweep fits in its memory" in out


def test_the_memory_one_call_needs_is_the_model_s_state_or_its_largest_input_whichever_is_more():
    model = torch.nn.Linear(10, 10)  # 110 float32 parameters: 440 bytes; training adds gradients and two moments
    found = {"ops": [{"shapes": [[250], [3]], "dtypes": ["float32", "int64"], "copy": None},
                     {"shapes": [[10]], "dtypes": ["float32"], "copy": {"bytes": 600}}]}
    assert ownmodel.memory_needed(model, found, train=False) == 1000  # the largest input: 250 float32
    assert ownmodel.memory_needed(model, found, train=True) == 4 * 440  # the parameters, gradients and moments
    copied = {"ops": [{"shapes": [[25]], "dtypes": ["float32"], "copy": {"bytes": 5000}}]}
    assert ownmodel.memory_needed(model, copied, train=False) == 5000  # the input's copy in
    model.weight.requires_grad_(False)  # frozen: Adam keeps nothing for it, and it has no gradient
    assert ownmodel.memory_needed(model, {"ops": []}, train=True) == 440 + 3 * 40
    model.register_buffer("running", torch.zeros(1000))  # 4,000 bytes every call holds
    assert ownmodel.memory_needed(model, found, train=False) == 440 + 4000


@pytest.mark.full
def test_an_operation_in_place_needs_its_input_alone(capsys, calibrated, model_file):
    # 2048 rows of 2,000,000 float32: 15.3 GiB, which a T4's 16 GiB holds; an in-place ReLU needs nothing more
    assert main(["predict", "--model", f"{model_file}:in_place", "--input", "2048x2000000", "--on", "t4",
                 "--json"]) == 0
    t4 = next(entry for entry in json.loads(capsys.readouterr().out) if entry["device"] == "t4")
    assert t4["memory_needed_gib"] == pytest.approx(2048 * 2_000_000 * 4 / 2**30) and t4["fits"] is True


def test_an_input_too_large_for_this_machine_s_real_call_is_refused_before_it_is_built(capsys, calibrated,
                                                                                      model_file, monkeypatch):
    free = type("Free", (), {"available": 2**30})()  # 1 GiB free: rows of 2**28 float32 take 2 GiB at batch 2
    monkeypatch.setattr(ownmodel.psutil, "virtual_memory", lambda: free)
    assert main(["predict", "--model", f"{model_file}:bare", "--input", f"4x{2**28}", "--on", "t4"]) == 2
    err = capsys.readouterr().err
    assert "--input" in err and "2.0 GiB" in err and "batch 2" in err and "narrower rows" in err


@pytest.mark.full
def test_a_name_given_twice_predicts_once_and_a_configuration_with_no_point_on_a_gpu_says_so(capsys, calibrated,
                                                                                             model_file):
    assert main(["predict", "--model", f"{model_file}:build", "--input", "8x84", "--on", "t4", "--on", "t4",
                 "--json"]) == 0
    assert [entry["device"] for entry in json.loads(capsys.readouterr().out)] == ["this", "t4"]
    assert main(["predict", "matmul", "--on", "t4", "--preset", "smoke", "--set", "variants=numpy"]) == 0
    assert "no point of this configuration runs on it (its variants: numpy)" in capsys.readouterr().out


def test_your_own_model_is_refused_read_only_before_it_runs(capsys, calibrated, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\nimport torch\ndef build():\n    return torch.nn.Linear(2, 2)\n")
    monkeypatch.setenv(settings.READ_ONLY_ENV, "1")
    assert main(["predict", "--model", f"{path}:build", "--input", "4x2", "--on", "this"]) == 2
    assert "read-only" in capsys.readouterr().err and not marker.exists()
