import compileall
import fcntl
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import ClassVar

import pytest
import zygote

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# Runs share one results cache outside the checkout (tests of the cache itself choose their own).
CACHE = Path(tempfile.mkdtemp(prefix="portcheck-test-cache-"))


def pytest_sessionstart(session):
    """portcheck's modules byte-compiled once, before any worker starts. The suite starts hundreds of Python
    processes that import portcheck (CLI runs that need a fresh interpreter, trace children that cannot be forked);
    where PYTHONDONTWRITEBYTECODE is set (this project's machine sets it), none of them keeps what it compiled, and
    each compiled every module it imports again: about 0.17 s of CPU a process. A process that runs tests starts
    its zygote now, so that it imports while the first tests run."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        compileall.compile_dir(ROOT / "portcheck", quiet=1)
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(session.config.option, "numprocesses", None):
        for kind in zygote.KINDS:
            zygote.started(kind, BASE_ENV)


def pytest_sessionfinish(session):
    zygote.close()


# The environment of `portcheck` as the tests run it (run_portcheck): colours off, the shared results cache.
BASE_ENV = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"} | {"NO_COLOR": "1",
                                                                          "PORTCHECK_CACHE_DIR": str(CACHE)}


def run_command(args, *, cwd=ROOT, env=None, input=None, text=True, timeout=None, fresh=False):
    """`python -m portcheck ARGS` as subprocess.run(..., capture_output=True) runs it: forked from this test
    process's zygote (tests/zygote.py) where that starts as a fresh interpreter would, else (or with `fresh`: a
    test of the process itself, its signals, time limits or start) a fresh interpreter. `env` is the whole
    environment (os.environ's when None)."""
    env = dict(os.environ if env is None else env)
    forks = None if fresh else zygote.started("hf" if "--hf-config" in args else "plain", BASE_ENV)
    if forks is not None and forks.equivalent(env, Path(cwd)):
        return forks.run(list(args), cwd=Path(cwd), env=env, input=input, text=text, timeout=timeout)
    zygote._log(f"command started fresh{' (asked)' if fresh else ''}: portcheck {' '.join(map(str, args))[:200]}")
    return subprocess.run([sys.executable, "-m", "portcheck", *args], cwd=cwd, input=input, capture_output=True,
                          text=text, env=env, timeout=timeout)


def run_portcheck(*args, cwd=None, stdin=None, env=None, fresh=False):
    """portcheck as a user runs it: a child process, its exit code, stdout and stderr (run_command)."""
    return run_command(args, cwd=cwd or ROOT, input=stdin, text=isinstance(stdin, str) or stdin is None,
                       env={**BASE_ENV, **(env or {})}, timeout=120, fresh=fresh)


@pytest.fixture
def portcheck():
    return run_portcheck


class FakeGitHub(http.server.BaseHTTPRequestHandler):
    """A real HTTP server's handler on 127.0.0.1 for GitHub's review API: answers a POST with `status` (200: the
    review's `html_url`, which carries the request's token with `echo_token`; else GitHub's error message, which
    names the token), and records each request's path, headers and JSON body in `requests`."""

    status = 200
    echo_token = False
    requests: ClassVar[list] = []

    def do_POST(self):  # http.server's name for the POST handler
        length = int(self.headers.get("Content-Length", 0))
        type(self).requests.append({"path": self.path, "headers": dict(self.headers),
                                    "body": json.loads(self.rfile.read(length))})
        token = (self.headers.get("Authorization") or "").split()[-1:]
        status = type(self).status
        url = "https://github.example/o/r/pull/7#review-1"
        if type(self).echo_token:
            url = f"https://github.example/o/r/pull/7?token={''.join(token)}"
        answer = {"html_url": url} if status == 200 else {"message": f"Bad credentials for {''.join(token)}"}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def github():
    """The API URL of a FakeGitHub server, fresh for the test (no requests, status 200, no token echo)."""
    FakeGitHub.requests = []
    FakeGitHub.status = 200
    FakeGitHub.echo_token = False
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeGitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class SharedRuns:
    """`python -m portcheck ARGS` runs whose result depends only on ARGS and the working directory — a model traced,
    a plan worked out from a traced model — made once a session and handed to every test that checks them, on
    whichever xdist worker it runs: the first to ask runs it under a lock in a directory every worker shares, the
    others wait for it and read its record. Each test parses the output afresh, so none sees another's changes.

    The file of `--emit-script FILE` is not part of what is run: the script is written once, to the run's directory,
    and copied (mode and all) to each FILE asked for; the output names the FILE asked for."""

    def __init__(self, shared: Path) -> None:
        self._shared = shared
        self._done: dict[tuple, tuple[subprocess.CompletedProcess, Path | None]] = {}

    def __call__(self, *args: str, cwd: Path = ROOT, timeout: float = 240) -> subprocess.CompletedProcess:
        argv = list(args)
        wanted = at = None
        if "--emit-script" in argv[:-1]:
            at = argv.index("--emit-script") + 1
            wanted = Path(cwd, argv[at])
            argv[at] = "<script>"
        key = (tuple(argv), str(cwd))
        if key not in self._done:
            self._done[key] = self._run(key, wanted, timeout)
        done, script = self._done[key]
        if script is None:
            return done
        if script.exists():
            shutil.copy2(script, wanted)
        named = (done.stdout.replace(str(script), args[at]), done.stderr.replace(str(script), args[at]))
        return subprocess.CompletedProcess([*done.args[:3], *args], done.returncode, *named)

    def _run(self, key: tuple, wanted: Path | None, timeout: float) -> tuple[subprocess.CompletedProcess, Path | None]:
        argv, cwd = list(key[0]), key[1]
        here = self._shared / hashlib.sha256(json.dumps(key).encode()).hexdigest()[:20]
        record = here / "run.json"
        with open(f"{here}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a worker asking for a run another is making waits for it
            if not record.is_file():
                here.mkdir()
                script = None
                if wanted is not None:
                    script = here / wanted.name
                    argv[argv.index("<script>")] = str(script)
                done = run_command(argv, cwd=cwd, timeout=timeout)
                record.write_text(json.dumps({"args": done.args, "returncode": done.returncode, "stdout": done.stdout,
                                              "stderr": done.stderr, "script": script and str(script)}))
        made = json.loads(record.read_text())
        done = subprocess.CompletedProcess(made["args"], made["returncode"], made["stdout"], made["stderr"])
        return done, made["script"] and Path(made["script"])


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory) -> SharedRuns:
    return SharedRuns(shared_directory(tmp_path_factory, "shared-runs"))


def shared_directory(tmp_path_factory, name: str) -> Path:
    """A directory of this session that every xdist worker sees (the one their own temporary directories are in)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    shared = root / name
    shared.mkdir(exist_ok=True)
    return shared


# The longest tests (CPU seconds each, child processes included, the zygotes' forks too: what one core spends on it;
# measured with tests/-wide rusage on 2 xdist workers on this project's 2-core machine, 2026-12-05), handed out first
# so that the last tests left for the workers are short ones and the workers finish together; everything else keeps
# its order.
LONGEST = {
    # mypy over portcheck/ with a cold cache (a clean clone has none): it reads torch's annotations
    "test_types.py::test_mypy_passes_on_portcheck": 45,
    "test_advise.py::test_a_full_size_script_dry_runs_on_the_meta_device": 37,
    "test_trace.py::test_mixtral_eager_experts_are_data_dependent": 17,
    "test_trn3.py::test_advise_plans_a_shipped_llm_config_on_trn3_through_vllm_neuron": 16,
    "test_trace_probe.py::test_the_whole_command_gives_byte_identical_json_under_load": 12,
    "test_report_page.py::test_every_finding_of_every_target_is_on_the_page": 10,
    "test_trace.py::test_mixtral_grouped_and_batched_dispatch_get_their_real_status": 9,
    "test_static_engine.py::test_positions_of_any_node_match_position_provider_without_generating_the_module": 8,
    "test_style.py::test_portcheck_scans_its_own_code_quiet": 8,
    # each model's tests share one trace on one worker (an xdist_group): the group starts with its first test
    "test_hf_models.py::test_each_model_exports_whole": 8,
    "test_advise.py::test_emitted_scripts_run_here_as_dry_runs": 8,
    "test_advise.py::test_a_script_with_tensor_parallelism_says_what_it_compiles": 8,
    "test_scaffold.py::test_the_skeletons_pass_the_rule_tests": 8,
    "test_bad_input.py::test_fix_killed_at_random_moments_leaves_every_file_wholly_old_or_wholly_new": 7,
    "test_integrations.py::test_the_pre_commit_hook_fails_on_findings_and_passes_once_fixed": 7,
    "test_server.py::test_an_edit_stops_the_analysis_of_the_text_it_replaces": 7,
    "test_cli.py::test_portcheck_scans_its_own_code_quiet": 7,
    "test_zygote.py::test_a_forked_trace_reports_what_a_fresh_one_does": 7,
    "test_advise.py::test_a_unet_is_compiled_as_one_and_sized_from_its_graph": 7,
    "test_hostile_round3.py::test_a_large_baseline_is_read_in_memory_that_follows_the_findings": 6,
    "test_advise.py::test_numbers_override_what_the_trace_found": 6,
    "test_properties.py::test_fixes_on_generated_porting_code_parse_and_are_idempotent": 6,
    "test_hf_models.py::test_no_library_finding_from_code_the_model_did_not_run": 6,
    "test_trace_path.py::test_a_library_reports_only_lines_that_ran_and_the_user_file_whole": 6,
    "test_report_page.py::test_each_model_shows_its_capture_ops_and_plan_per_target_as_trace_and_advise_report_them": 6,
    "test_serving.py::test_the_vllm_script_dry_runs_here_and_shows_the_command": 6,
    "test_static_engine.py::test_the_fast_engine_reports_what_the_slow_one_does_on_every_fixture": 5,
    "test_hostile_round3.py::test_an_if_test_of_hundreds_of_terms_is_analysed_not_too_deep": 5,
    "test_hf_models.py::test_a_fixed_size_vision_model_is_not_probed_for_image_sizes": 5,
    "test_hostile_input.py::test_groups_of_statements_find_what_the_whole_file_finds": 5,
    "test_advise.py::test_a_traced_model_gives_int64_flags_on_trn2_native_only": 5,
    "test_fix_cli.py::test_fixing_the_shipped_examples_touches_only_fixed_lines": 5,
    "test_report_page.py::test_advise_and_trace_show_their_steps_on_a_terminal_and_nothing_otherwise": 5,
    "test_serving.py::test_the_script_builds_the_model_in_its_serving_dtype": 5,
    "test_hf_models.py::test_on_the_meta_device_the_eager_run_is_skipped_and_said": 5,
    "test_trace_path.py::test_transformers_files_read_and_their_findings_are_the_same_for_both_targets": 4,
    "test_server.py::test_the_trace_command_runs_the_model_in_the_traces_child_and_shows_its_findings": 4,
    "test_trace_judgment.py::test_the_trace_weighs_its_findings": 4,
    "test_hostile_input.py::test_trace_child_imports_nothing_from_the_working_directory": 4,
    "test_hostile_input.py::test_a_large_generated_module_is_analysed_not_refused": 4,
    "test_hostile_world.py::test_a_process_with_a_clean_environment_and_its_own_session_is_swept": 4,
    "test_hostile_input.py::test_nothing_the_model_starts_outlives_the_trace": 4,
    "test_trace_path.py::test_transformers_code_the_model_never_ran_is_not_reported": 4,
    "test_trace_path.py::test_one_construct_one_finding_with_both_witnesses": 3,
    "test_serving.py::test_a_compile_only_script_for_a_path_without_one_stops_with_a_reason": 3,
    "test_zygote.py::test_a_trace_child_is_forked_from_the_zygote_unless_asked_fresh": 3,
    "test_trn3.py::test_report_shows_trn3_next_to_trn2": 3,
    "test_trace_exit.py::test_a_clean_model_with_advice_only_exits_0": 3,
    "test_advise_pooling.py::test_advise_emits_the_pooling_runner_from_the_checkpoint_directory": 3,
}


def pytest_collection_modifyitems(config, items):
    def cost(item) -> float:
        return LONGEST.get(f"{Path(item.path).name}::{getattr(item, 'originalname', item.name)}", 0)

    items.sort(key=lambda item: -cost(item))
