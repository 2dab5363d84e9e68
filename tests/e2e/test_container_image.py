"""The Dockerfile, built and run here without a Docker engine.

- The base image is Debian made by `debootstrap` (python3 + python3-venv, as BASE_IMAGE), imported
  into buildah's storage: public image registries are unreachable, Debian's mirror is not. Its
  tarball is cached in the test cache (~/.cache/graphrt-tests or $GRAPHRT_TEST_CACHE).
- `buildah build --isolation chroot --storage-driver vfs --format docker` builds the repository's
  Dockerfile as is (docker format keeps HEALTHCHECK). pip inside the build reaches PyPI; where the
  host trusts an extra CA (a TLS-intercepting proxy), the host's CA bundle is lent to the RUN
  steps through a mounted /etc/pip.conf and is not part of the image.
- The image runs with `buildah run --isolation oci --runtime runc --network host`: a real container
  (own PID and mount namespaces, the image's user, environment and working directory) on the
  host's network, like `docker run --network host`. The command line is the image's ENTRYPOINT
  plus the arguments a user would give `docker run`. crun, buildah's default runtime, refuses this
  machine's hybrid cgroup layout ("cgroups in hybrid mode not supported"); runc accepts it.
- The HEALTHCHECK command runs inside the running container the way `docker exec` would
  (nsenter into its PID, mount and network namespaces as the image's user); SIGTERM goes to the
  container's PID 1, as `docker stop` sends it.

All of it needs root (buildah's vfs storage, chroot, runc). Everything lives in a temporary
storage root that is deleted at the end. Measured on 2 cores: debootstrap ~45 s (first run only,
then cached), the build 35-60 s (mostly `pip install` from PyPI), each `buildah from` of the
~640 MB image 5-10 s (vfs copies it), each container start ~5 s: ~1 min 45 s in all with the
base cached, ~2 min 30 s without.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_NAME = "SmolLM2-135M-Instruct"
SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
BASE_IMAGE = f"localhost/graphrt-test-base:{SUITE}"
IMAGE = "localhost/graphrt:test"
BUILD_TIMEOUT = 1200.0
READY_TIMEOUT = 120.0
STOP_TIMEOUT = 60.0
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
TOOLS = ("buildah", "runc", "debootstrap", "nsenter", "tar")


# Root's tools (runc, debootstrap and what they call) live in /usr/sbin.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def tool(name: str) -> str:
    """Absolute path of a tool, or the bare name if it is not installed."""
    return shutil.which(name, path=SEARCH_PATH) or name


# `docker run --network host`: OCI isolation through runc (see the module docstring).
RUN_OPTIONS = ("--isolation", "oci", "--runtime", tool("runc"), "--network", "host")


def cache_dir_for_tests() -> Path:
    override = os.environ.get("GRAPHRT_TEST_CACHE")
    return Path(override) if override else Path.home() / ".cache" / "graphrt-tests"


def missing_requirements() -> str | None:
    """Why this module cannot run here, or None. Each reason names what is missing."""
    if sys.platform != "linux":
        return f"buildah, runc and debootstrap are Linux tools (platform {sys.platform})"
    if os.geteuid() != 0:
        return (
            f"needs root (euid {os.geteuid()}): buildah's vfs storage with chroot isolation, "
            "runc and debootstrap run as root here"
        )
    missing = [name for name in TOOLS if not os.path.isabs(tool(name))]
    if missing:
        return (
            f"{', '.join(missing)} not installed; .ci/run installs them with "
            "`apt-get install buildah runc debootstrap`"
        )
    return None


pytestmark = pytest.mark.system


@pytest.fixture(autouse=True, scope="module")
def _tools_installed() -> None:
    """Not a skip: a test that skips proves nothing. .ci/run installs the tools.

    Checked when a test runs, never at import, so collecting the suite works without them.
    """
    missing = missing_requirements()
    if missing:
        pytest.fail(missing, pytrace=False)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run(
    argv: Sequence[str], timeout: float = 300.0, log: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run to completion; fail the test with the command's output if it fails."""
    started = time.monotonic()
    result = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PATH": SEARCH_PATH},
    )
    output = result.stdout + result.stderr
    if log is not None:
        log.write_text(output, encoding="utf-8")
    if result.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited with {result.returncode}:\n{output[-6000:]}")
    print(f"[{time.monotonic() - started:6.1f} s] {' '.join(argv[:8])} ...")
    return result


# -------------------------------------------------------------------------------- buildah


@dataclass
class Buildah:
    """buildah with its own storage (vfs) under `root`, so nothing outside the test is touched."""

    root: Path

    def command(self, *args: str) -> list[str]:
        return [
            tool("buildah"),
            "--root",
            str(self.root / "storage"),
            "--runroot",
            str(self.root / "run"),
            "--storage-driver",
            "vfs",
            *args,
        ]

    def __call__(
        self, *args: str, timeout: float = 300.0, log: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run(self.command(*args), timeout, log)

    def run_once(
        self, image: str, argv: Sequence[str], env: Sequence[str] = ()
    ) -> subprocess.CompletedProcess[str]:
        """`docker run --rm --network host IMAGE` with argv as the command (no entrypoint)."""
        container = self("from", image).stdout.strip()
        options = [option for variable in env for option in ("--env", variable)]
        try:
            return subprocess.run(
                self.command("run", *RUN_OPTIONS, *options, container, "--", *argv),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        finally:
            self("rm", container)

    def image_config(self, image: str) -> dict[str, Any]:
        inspected = json.loads(self("inspect", "--type", "image", image).stdout)
        config: dict[str, Any] = inspected["Docker"]["config"]
        return config


@pytest.fixture(scope="module")
def buildah(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Buildah]:
    storage = Buildah(tmp_path_factory.mktemp("buildah"))
    try:
        yield storage
    finally:
        # vfs keeps a full copy of every layer (GBs): never leave it in pytest's kept tmp dirs.
        subprocess.run(storage.command("rm", "--all"), capture_output=True, check=False)
        subprocess.run(storage.command("rmi", "--all", "--force"), capture_output=True, check=False)
        shutil.rmtree(storage.root, ignore_errors=True)


def debootstrap_tarball() -> Path:
    """A minimal Debian with python3 + venv as a tarball, made once and cached."""
    cache = cache_dir_for_tests() / "debootstrap"
    tarball = cache / f"{SUITE}-{'-'.join(BASE_PACKAGES)}.tar"
    if tarball.is_file():
        return tarball
    cache.mkdir(parents=True, exist_ok=True)
    rootfs = cache / f"rootfs-{os.getpid()}"
    partial = tarball.with_suffix(f".tar.{os.getpid()}")
    try:
        run(
            [
                tool("debootstrap"),
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                SUITE,
                str(rootfs),
            ],
            timeout=900.0,
        )
        # What an official image leaves out too: downloaded .debs and package lists.
        for leftovers in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (rootfs / leftovers).glob("*"):
                if path.is_file():
                    path.unlink()
        run([tool("tar"), "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."])
        partial.replace(tarball)
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
        partial.unlink(missing_ok=True)
    return tarball


@pytest.fixture(scope="module")
def base_image(buildah: Buildah) -> str:
    tarball = debootstrap_tarball()
    with tarfile.open(tarball) as archive:
        assert "./usr/bin/python3" in archive.getnames()
    container = buildah("from", "scratch").stdout.strip()
    buildah("add", container, str(tarball), "/")
    buildah("commit", "--quiet", container, BASE_IMAGE)
    buildah("rm", container)
    return BASE_IMAGE


@dataclass(frozen=True)
class Image:
    name: str
    config: dict[str, Any]
    build_seconds: float


@pytest.fixture(scope="module")
def image(buildah: Buildah, base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Image:
    scratch = tmp_path_factory.mktemp("build")
    args = [
        "build",
        "--isolation",
        "chroot",
        "--format",
        "docker",
        "--build-arg",
        f"BASE_IMAGE={base_image}",
        "--tag",
        IMAGE,
        "--file",
        str(REPO / "Dockerfile"),
    ]
    ca_bundle = os.environ.get("PIP_CERT") or HOST_CA_BUNDLE
    if Path(ca_bundle).is_file():
        pip_conf = scratch / "pip.conf"
        pip_conf.write_text("[global]\ncert = /run/host-ca/ca.crt\n", encoding="utf-8")
        args += ["--volume", f"{pip_conf}:/etc/pip.conf:ro"]
        args += ["--volume", f"{Path(ca_bundle).resolve()}:/run/host-ca/ca.crt:ro"]
    started = time.monotonic()
    buildah(*args, str(REPO), timeout=BUILD_TIMEOUT, log=scratch / "build.log")
    seconds = time.monotonic() - started
    print(f"image built in {seconds:.0f} s")
    return Image(IMAGE, buildah.image_config(IMAGE), seconds)


# ------------------------------------------------------------------------------ containers


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in task.read_text().split()]
    return found


def pid_namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/pid")


class Container:
    """`docker run --network host IMAGE ARGS...`: buildah run of the ENTRYPOINT with ARGS."""

    def __init__(
        self,
        buildah: Buildah,
        image: Image,
        args: Sequence[str],
        log_path: Path,
        volumes: Sequence[str] = (),
        env: Sequence[str] = (),
    ) -> None:
        self.buildah = buildah
        self.name = buildah("from", image.name).stdout.strip()
        self.port = int(args[args.index("--rest_port") + 1])
        self.log_path = log_path
        options = list(RUN_OPTIONS)
        for volume in volumes:
            options += ["--volume", volume]
        for variable in env:
            options += ["--env", variable]
        self.argv = [*image.config["Entrypoint"], *args]
        self._log = log_path.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            buildah.command("run", *options, self.name, "--", *self.argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._pid: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def pid(self) -> int:
        """Host PID of the container's PID 1: the first descendant in another PID namespace."""
        if self._pid is None:
            host = pid_namespace(os.getpid())
            queue = [self.process.pid]
            while queue:
                pid = queue.pop(0)
                with contextlib.suppress(OSError):
                    if pid_namespace(pid) != host:
                        self._pid = pid
                        break
                queue += children(pid)
            else:
                raise LookupError(f"no container process under buildah run:\n{self.log()}")
        return self._pid

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        with httpx.Client(base_url=self.base_url, timeout=5.0) as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    pytest.fail(
                        f"the container exited with {self.process.returncode}:\n{self.log()}"
                    )
                with contextlib.suppress(httpx.TransportError):
                    if http.get("/v2/health/ready").status_code == 200:
                        return
                time.sleep(0.2)
        pytest.fail(f"the container was not ready within {READY_TIMEOUT:.0f} s:\n{self.log()}")

    def exec(self, argv: Sequence[str], user: str) -> subprocess.CompletedProcess[str]:
        """`docker exec`: run argv inside the running container's namespaces as `user`."""
        uid, gid = user.split(":")
        namespaces = ["--pid", "--mount", "--net", "--root", "--wd"]
        return subprocess.run(
            [
                tool("nsenter"),
                "--target",
                str(self.pid()),
                *namespaces,
                "-S",
                uid,
                "-G",
                gid,
                *argv,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def stop(self) -> int:
        """`docker stop`: SIGTERM to the container's PID 1; the exit code of `buildah run`."""
        if self.process.poll() is None:
            with contextlib.suppress(LookupError, ProcessLookupError):
                os.kill(self.pid(), signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(LookupError, ProcessLookupError):
                    os.kill(self.pid(), signal.SIGKILL)
                self.process.kill()
                self.process.wait()
        self._log.close()
        subprocess.run(self.buildah.command("rm", self.name), capture_output=True, check=False)
        return self.process.returncode


@contextlib.contextmanager
def running(container: Container) -> Iterator[Container]:
    try:
        container.wait_ready()
        yield container
    finally:
        code = container.stop()
    assert code == 0, f"the container exited with {code} after SIGTERM:\n{container.log()}"


def chat(base_url: str, model: str) -> str:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 20,
        "temperature": 0,
    }
    with httpx.Client(base_url=base_url, timeout=120.0) as http:
        response = http.post("/v3/chat/completions", json=body)
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["model"] == model
    content: str = reply["choices"][0]["message"]["content"]
    return content


def listening_on_all_interfaces(port: int) -> bool:
    """A LISTEN socket on 0.0.0.0:port in /proc/net/tcp (the host's network namespace)."""
    for line in Path("/proc/net/tcp").read_text(encoding="ascii").splitlines()[1:]:
        fields = line.split()
        address, hex_port = fields[1].split(":")
        if fields[3] == "0A" and int(hex_port, 16) == port and address == "00000000":
            return True
    return False


# ------------------------------------------------------------------------------------ tests


def test_image_is_configured_for_deployment(image: Image, buildah: Buildah) -> None:
    config = image.config
    # A numeric non-root user: Kubernetes' runAsNonRoot can only verify a numeric one.
    user = config["User"]
    assert user.split(":")[0].isdigit() and int(user.split(":")[0]) != 0, user
    entrypoint = config["Entrypoint"]
    assert entrypoint[0].endswith("/graphrt") and entrypoint[1] == "serve", entrypoint
    assert entrypoint[entrypoint.index("--rest_bind_address") + 1] == "0.0.0.0"
    assert config["Cmd"] == ["--rest_port", "8000"]
    assert "8000/tcp" in config["ExposedPorts"]
    assert config["Healthcheck"]["Test"][0] == "CMD"
    assert "/opt/graphrt/healthcheck.py" in config["Healthcheck"]["Test"]
    # Multi-stage: the source tree and pip's caches stay in the builder.
    container = buildah("from", image.name).stdout.strip()
    try:
        mount = Path(buildah("mount", container).stdout.strip())
        assert not (mount / "src").exists()
        assert not (mount / "root/.cache/pip").exists()
        assert (mount / "models").is_dir()
        cache = mount / "opt/cache"  # OpenVINO's model cache, on (--cache_dir's default)
        assert cache.is_dir() and cache.stat().st_uid == int(user.split(":")[0])
        gguf = mount / "opt/graphrt/cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
        assert gguf.stat().st_size > 50_000_000
        assert gguf.stat().st_uid == int(user.split(":")[0])
        buildah("umount", container)
    finally:
        buildah("rm", container)


@pytest.fixture(scope="module")
def default_container(
    buildah: Buildah, image: Image, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Container]:
    """`docker run IMAGE --rest_port PORT`, with pip unable to reach any index."""
    log = tmp_path_factory.mktemp("container") / "container.log"
    port = free_port()
    # If the server tried to fetch the default model, `pip download` would fail at once.
    env = ["PIP_NO_INDEX=1"]
    with running(Container(buildah, image, ["--rest_port", str(port)], log, env=env)) as started:
        yield started


def test_container_serves_the_baked_default_model(default_container: Container) -> None:
    assert "Paris" in chat(default_container.base_url, DEFAULT_NAME)
    log = default_container.log()
    assert "fetching the default model" not in log
    assert "/opt/graphrt/cache/models/SmolLM2-135M-Instruct.Q4_1.gguf" in log
    # The baked tokenizer IR was found (else the engine would convert and warn on a cache miss).
    assert "could not cache the tokenizer" not in log
    # And so was genai's graph of the file: the engine loads it rather than saving it again.
    assert "saved in /opt/graphrt/cache/gguf-genai/" in log
    assert "saving openvino-genai's graph" not in log
    assert listening_on_all_interfaces(default_container.port)


def test_container_runs_as_the_image_user(default_container: Container, image: Image) -> None:
    status = Path(f"/proc/{default_container.pid()}/status").read_text(encoding="ascii")
    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
    assert set(uids) == {image.config["User"].split(":")[0]}
    cmdline = Path(f"/proc/{default_container.pid()}/cmdline").read_bytes().split(b"\0")
    assert b"serve" in cmdline  # the server is the container's PID 1, as under docker run


def test_healthcheck_command_reports_readiness(default_container: Container, image: Image) -> None:
    test = image.config["Healthcheck"]["Test"][1:]
    healthy = default_container.exec(test, image.config["User"])
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert f":{default_container.port}/v2/health/ready: 200" in healthy.stdout
    # Nothing listening on the port it is told about: unhealthy. (Another container of the
    # image, whose PID 1 is the health check itself, so it falls back to $GRAPHRT_REST_PORT.)
    closed = free_port()
    result = default_container.buildah.run_once(
        image.name, test, env=[f"GRAPHRT_REST_PORT={closed}"]
    )
    assert result.returncode != 0
    assert f"127.0.0.1:{closed}/v2/health/ready" in result.stdout + result.stderr


# The documented mount point (docs/deployment.md), and the one OVMS's own docker run lines use.
@pytest.mark.parametrize("mount", ["/models", "/workspace"])
def test_docker_run_line_with_a_mounted_config(
    buildah: Buildah,
    image: Image,
    smollm2_gguf: Path,
    run_graphrt: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path_factory: pytest.TempPathFactory,
    mount: str,
) -> None:
    """docs/deployment.md's lines: -v $(pwd)/models:MOUNT:ro IMAGE --rest_port N --config_path
    MOUNT/config.json."""
    work = tmp_path_factory.mktemp("models_mount")
    exported = run_graphrt(
        "export",
        "text_generation",
        "--source_model",
        str(smollm2_gguf),
        "--model_repository_path",
        "models",
        "--config_file_path",
        "models/config.json",
        "--model_name",
        "smollm2",
        cwd=work,
    )
    assert exported.returncode == 0, exported.stderr
    models = work / "models"
    models.chmod(0o755)  # readable by the image's user (pytest's tmp dirs are 0700)
    for path in models.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    port = free_port()
    args = ["--rest_port", str(port), "--config_path", f"{mount}/config.json"]
    container = Container(
        buildah, image, args, work / "container.log", volumes=[f"{models}:{mount}:ro"]
    )
    with running(container):
        assert "Paris" in chat(container.base_url, "smollm2")
        written = container.exec(["/bin/sh", "-c", f"touch {mount}/x"], image.config["User"])
        assert written.returncode != 0
        assert "Read-only file system" in written.stderr
        # The server's user owns its cache, not its code.
        user = image.config["User"]
        code = container.exec(["/bin/sh", "-c", "touch /opt/graphrt/venv/bin/x"], user)
        assert code.returncode != 0 and "Permission denied" in code.stderr, code.stderr
        cache = container.exec(["/bin/sh", "-c", "touch /opt/graphrt/cache/x"], user)
        assert cache.returncode == 0, cache.stderr
    log = container.log()
    # openvino-genai opens a GGUF read-write, so the server loads a copy of the read-only file.
    assert f"{mount}/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf is read-only" in log
    assert "stopped" in log  # graceful shutdown on SIGTERM to PID 1
