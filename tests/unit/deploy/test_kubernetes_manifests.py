"""deploy/kubernetes/: schema-valid offline, and consistent with graphrt and with each other.

Kubernetes kinds are validated strictly (unknown fields are errors) with `kubernetes-validate`,
whose package carries the Kubernetes JSON schemas, against the oldest and the newest Kubernetes
release it knows. KServe's custom resources, and the InferencePool and HTTPRoute of the
inference gateway (deploy/kubernetes/gateway/), are validated against the openAPIV3Schema of
their own CRDs (vendored in tests/fixtures/kserve and tests/fixtures/gateway, see their
READMEs), made strict the way the API server prunes: an object schema that lists its properties
and does not preserve unknown fields accepts no others. Negative controls show the validators
reject a misspelled field.

What a schema cannot see is checked here too: every container's args parse with graphrt's own
CLI, ports and probes agree with the flags, selectors match the pod labels, the grace period
covers --shutdown_timeout, config.json is OVMS's and points into the models volume, the user is
the image's, and writable paths exist where the root filesystem is read-only. For the gateway:
the pool selects the graphrt pods (and not the picker's) on graphrt's port, the route, the pool
and the picker name each other, and the picker's configuration is whole (every reference
resolves, its keys are the router's) and reads metrics graphrt defines, with the types the
protocol asks for, under the engine label the pods carry.
"""

from __future__ import annotations

import argparse
import copy
import functools
import gzip
import hashlib
import importlib
import importlib.util
import json
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from graphrt.cli.main import build_parser
from tests import endpoint_picker

# Imported by name: these ship no type stubs (and their stubs are not test dependencies).
jsonschema: Any = importlib.import_module("jsonschema")
kubernetes_validate: Any = importlib.import_module("kubernetes_validate")
yaml: Any = importlib.import_module("yaml")

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "deploy" / "kubernetes"
KSERVE_CRDS = ROOT / "tests" / "fixtures" / "kserve"
GATEWAY_CRDS = ROOT / "tests" / "fixtures" / "gateway"
# Custom resources: kind -> (fixture directory, CRD plural).
CRDS = {
    "InferenceService": (KSERVE_CRDS, "inferenceservices"),
    "ServingRuntime": (KSERVE_CRDS, "servingruntimes"),
    "InferencePool": (GATEWAY_CRDS, "inferencepools"),
    "HTTPRoute": (GATEWAY_CRDS, "httproutes"),
}
KUBERNETES_VERSIONS = [kubernetes_validate.utils.all_versions()[0], "latest"]
LABELS = {"app.kubernetes.io/name": "graphrt"}

Resource = dict[str, Any]


def load(path: Path) -> list[Resource]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def kubernetes_files() -> list[Path]:
    return sorted(path for path in MANIFESTS.glob("*.yaml") if path.name != "kustomization.yaml")


def resources() -> dict[str, Resource]:
    """Every Kubernetes resource of deploy/kubernetes by kind (one of each kind there)."""
    found: dict[str, Resource] = {}
    for path in kubernetes_files():
        for doc in load(path):
            assert doc["kind"] not in found, f"two {doc['kind']}s"
            found[doc["kind"]] = doc
    return found


def kserve() -> dict[str, Resource]:
    return {
        doc["kind"]: doc for path in (MANIFESTS / "kserve").glob("*.yaml") for doc in load(path)
    }


def gateway_files() -> list[Path]:
    return sorted(
        p for p in (MANIFESTS / "gateway").glob("*.yaml") if p.name != "kustomization.yaml"
    )


def gateway() -> dict[str, Resource]:
    """deploy/kubernetes/gateway/'s resources by kind (one of each kind there)."""
    found: dict[str, Resource] = {}
    for path in gateway_files():
        for doc in load(path):
            assert doc["kind"] not in found, f"two {doc['kind']}s"
            found[doc["kind"]] = doc
    return found


def serve_args(args: list[str]) -> argparse.Namespace:
    """`graphrt serve ARGS` as the CLI parses them (the image's entrypoint adds `serve`)."""
    return build_parser().parse_args(["serve", *args])


# ------------------------------------------------------------------------- schema validation


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("path", kubernetes_files() + gateway_files(), ids=lambda path: path.name)
def test_kubernetes_resources_match_the_schemas(path: Path, version: str) -> None:
    wanted = kubernetes_validate.utils.latest_version() if version == "latest" else version
    for doc in load(path):
        if doc["kind"] in CRDS:
            continue  # custom resources: test_custom_resources_match_their_crds
        try:
            kubernetes_validate.validate(doc, wanted, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = ".".join(str(part) for part in error.path)
            pytest.fail(f"{path.name}: {doc['kind']} at {where}: {error.message}")


def test_kubernetes_validation_rejects_a_misspelled_field() -> None:
    deployment = copy.deepcopy(resources()["Deployment"])
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    probe["httpGet"]["pth"] = probe["httpGet"].pop("path")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, kubernetes_validate.utils.latest_version(), True)


def test_kustomizations_list_every_manifest() -> None:
    (kustomization,) = load(MANIFESTS / "kustomization.yaml")
    assert sorted(kustomization["resources"]) == [path.name for path in kubernetes_files()]
    (kustomization,) = load(MANIFESTS / "gateway" / "kustomization.yaml")
    assert sorted(kustomization["resources"]) == [path.name for path in gateway_files()]


@functools.cache
def crd(directory: Path, name: str) -> Resource:
    """A vendored CRD, after checking it is the file the fixture README names. Parsed once:
    KServe's InferenceService definition is megabytes of YAML (seconds to read); the callers
    never change what they get (strict() builds a new schema)."""
    raw = gzip.decompress((directory / f"{name}.yaml.gz").read_bytes())
    readme = (directory / "README.md").read_text(encoding="utf-8")
    expected = re.search(rf"`{re.escape(name)}\.yaml\.gz` \|[^\n]* `([0-9a-f]{{64}})` \|", readme)
    assert expected, f"{name} is not listed in {directory / 'README.md'}"
    assert hashlib.sha256(raw).hexdigest() == expected[1]
    # libyaml's loader where PyYAML was built with it (the pure-Python one is ~10x slower).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    definition: Resource = yaml.load(raw, Loader=loader)
    return definition


def strict(schema: Any) -> Any:
    """openAPIV3Schema as the API server applies it: unknown fields are not accepted."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        result["additionalProperties"] = False
    return result


def crd_validator(doc: Resource) -> Any:
    group, version = doc["apiVersion"].split("/")
    directory, plural = CRDS[doc["kind"]]
    definition = crd(directory, f"{group}_{plural}")
    assert definition["spec"]["group"] == group
    assert definition["spec"]["names"]["kind"] == doc["kind"]
    (served,) = [v for v in definition["spec"]["versions"] if v["name"] == version]
    assert served["served"], f"{doc['apiVersion']} {doc['kind']} is not served"
    schema = strict(served["schema"]["openAPIV3Schema"])
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize("kind", list(CRDS))
def test_custom_resources_match_their_crds(kind: str) -> None:
    doc = {**kserve(), **gateway()}[kind]
    errors = sorted(crd_validator(doc).iter_errors(doc), key=lambda error: list(error.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    assert doc["metadata"]["name"]


@pytest.mark.parametrize(
    ("kind", "mistake"),
    [
        ("InferenceService", lambda doc: doc["spec"]["predictor"]["model"].update(storageURI="x")),
        ("InferenceService", lambda doc: doc["spec"]["predictor"].update(minReplicas="one")),
        ("ServingRuntime", lambda doc: doc["spec"].update(supportedModelFormat=[])),
        ("ServingRuntime", lambda doc: doc["spec"]["containers"][0].update(args="--rest_port")),
        ("InferencePool", lambda doc: doc["spec"].update(targetPort=[{"number": 8000}])),
        ("InferencePool", lambda doc: doc["spec"]["endpointPickerRef"].update(failureMode="Open")),
        ("HTTPRoute", lambda doc: doc["spec"]["rules"][0]["backendRefs"][0].update(port="x")),
    ],
)
def test_crd_validation_rejects_mistakes(kind: str, mistake: Any) -> None:
    doc = copy.deepcopy({**kserve(), **gateway()}[kind])
    mistake(doc)
    assert list(crd_validator(doc).iter_errors(doc))


# ------------------------------------------------------------------------------- consistency


def container(pod_spec: Resource) -> Resource:
    (only,) = pod_spec["containers"]
    result: Resource = only
    return result


def test_selectors_match_the_pod_labels() -> None:
    found = resources()
    pod_labels = found["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert found["Deployment"]["spec"]["selector"]["matchLabels"] == LABELS
    assert LABELS.items() <= pod_labels.items()
    assert found["Service"]["spec"]["selector"] == LABELS
    assert found["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == LABELS
    target = found["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == (
        "Deployment",
        found["Deployment"]["metadata"]["name"],
    )
    assert found["HorizontalPodAutoscaler"]["spec"]["minReplicas"] >= 2  # the PDB keeps one up
    pdb = found["PodDisruptionBudget"]["spec"]
    assert pdb.get("maxUnavailable") == 1 or pdb.get("minAvailable") == 1


def test_deployment_serves_with_valid_flags_probes_and_ports() -> None:
    found = resources()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    main = container(pod)
    args = serve_args(main["args"])
    ports = {port["name"]: port["containerPort"] for port in main["ports"]}
    assert ports == {"http": args.rest_port, "grpc": args.port}
    assert main["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert main["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    service_ports = {port["name"]: port["targetPort"] for port in found["Service"]["spec"]["ports"]}
    assert service_ports == {"http": "http", "grpc": "grpc"}
    assert args.metrics_enable  # the HPA's queue metric and the scrape annotations need it
    annotations = found["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(args.rest_port)


def test_grace_period_covers_the_shutdown_timeout() -> None:
    pod = resources()["Deployment"]["spec"]["template"]["spec"]
    main = container(pod)
    args = serve_args(main["args"])
    command = main["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    needed = float(command[1]) + args.shutdown_timeout
    assert needed < pod["terminationGracePeriodSeconds"] <= needed + 30


def mounts(pod: Resource) -> dict[str, Resource]:
    """mountPath -> the volume mounted there."""
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    return {m["mountPath"]: volumes[m["name"]] for m in container(pod)["volumeMounts"]}


def test_config_json_is_mounted_and_points_into_the_models_volume() -> None:
    found = resources()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    args = serve_args(container(pod)["args"])
    config_path = PurePosixPath(args.config_path)
    mounted = mounts(pod)
    config_volume = mounted[str(config_path.parent)]
    assert config_volume["configMap"]["name"] == found["ConfigMap"]["metadata"]["name"]
    config = json.loads(found["ConfigMap"]["data"][config_path.name])
    assert config["model_config_list"] == []
    models_dir = next(path for path, volume in mounted.items() if "persistentVolumeClaim" in volume)
    claim = mounted[models_dir]["persistentVolumeClaim"]
    assert claim == {
        "claimName": found["PersistentVolumeClaim"]["metadata"]["name"],
        "readOnly": True,
    }
    for entry in config["mediapipe_config_list"]:
        assert PurePosixPath(entry["base_path"]).is_relative_to(models_dir), entry
    # The job fills that volume with what config.json names.
    job = container(found["Job"]["spec"]["template"]["spec"])
    exported = build_parser().parse_args([*job["command"][1:], *job["args"]])
    job_mounts = mounts(found["Job"]["spec"]["template"]["spec"])
    assert (
        job_mounts[exported.model_repository_path]["persistentVolumeClaim"]["claimName"]
        == (claim["claimName"])
    )
    assert {e["name"] for e in config["mediapipe_config_list"]} == {exported.model_name}
    assert {e["base_path"] for e in config["mediapipe_config_list"]} == {
        f"{models_dir}/{exported.model_name}"
    }


def image_user() -> int:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    (user,) = re.findall(r"^USER (\d+):\d+$", dockerfile, flags=re.MULTILINE)
    return int(user)


def test_pods_run_as_the_image_user_without_privileges() -> None:
    found = resources()
    for kind in ("Deployment", "Job"):
        pod = found[kind]["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == image_user()
        security = container(pod)["securityContext"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]


def test_read_only_root_has_writable_cache_and_tmp() -> None:
    pod = resources()["Deployment"]["spec"]["template"]["spec"]
    main = container(pod)
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    env = {variable["name"]: variable["value"] for variable in main["env"]}
    writable = {path for path, volume in mounts(pod).items() if "emptyDir" in volume}
    # /opt/cache: OpenVINO's compiled-model cache, which the image turns on (--cache_dir).
    assert {env["GRAPHRT_CACHE"], env["HOME"], "/tmp", "/opt/cache"} <= writable


def test_serving_runtime_runs_the_inference_service() -> None:
    found = kserve()
    runtime, service = found["ServingRuntime"], found["InferenceService"]
    model = service["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    formats = {f["name"] for f in runtime["spec"]["supportedModelFormats"]}
    assert model["modelFormat"]["name"] in formats
    main = container(runtime["spec"])
    assert main["name"] == "kserve-container"
    args = serve_args(
        [arg.replace("{{.Name}}", service["metadata"]["name"]) for arg in main["args"]]
    )
    assert args.model_path == "/mnt/models"  # where KServe's storage initializer puts the model
    assert args.model_name == service["metadata"]["name"]
    assert [port["containerPort"] for port in main["ports"]] == [args.rest_port]
    assert main["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": args.rest_port}
    assert main["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": args.rest_port}
    assert runtime["spec"]["annotations"]["prometheus.kserve.io/port"] == str(args.rest_port)
    assert args.metrics_enable
    grace = service["spec"]["predictor"]["terminationGracePeriodSeconds"]
    assert args.shutdown_timeout < grace
    assert main["securityContext"]["runAsUser"] == image_user()


# ---------------------------------------------------------------------------- inference gateway


def flag(args: list[str], name: str) -> str:
    """The value of `--name=value` in a container's args."""
    (value,) = [arg.split("=", 1)[1] for arg in args if arg.startswith(f"--{name}=")]
    return value


def test_the_pool_selects_the_graphrt_replicas_on_their_rest_port() -> None:
    pool = gateway()["InferencePool"]["spec"]
    replicas = resources()["Deployment"]["spec"]["template"]
    assert pool["selector"]["matchLabels"].items() <= replicas["metadata"]["labels"].items()
    rest_port = serve_args(container(replicas["spec"])["args"]).rest_port
    assert pool["targetPorts"] == [{"number": rest_port}]
    # The picker's own pods are not endpoints of the pool (nor of graphrt's Service).
    picker_labels = gateway()["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert not pool["selector"]["matchLabels"].items() <= picker_labels.items()
    assert not resources()["Service"]["spec"]["selector"].items() <= picker_labels.items()


def test_route_pool_and_picker_name_each_other() -> None:
    found = gateway()
    pool, picker, service = found["InferencePool"], found["Deployment"], found["Service"]
    (rule,) = found["HTTPRoute"]["spec"]["rules"]
    (backend,) = rule["backendRefs"]
    assert (backend["group"], backend["kind"], backend["name"]) == (
        "inference.networking.k8s.io",
        "InferencePool",
        pool["metadata"]["name"],
    )
    reference = pool["spec"]["endpointPickerRef"]
    assert (reference["kind"], reference["name"]) == ("Service", service["metadata"]["name"])
    (grpc,) = [
        port for port in service["spec"]["ports"] if port["port"] == reference["port"]["number"]
    ]
    epp = container(picker["spec"]["template"]["spec"])
    ports = {port["name"]: port["containerPort"] for port in epp["ports"]}
    assert ports[grpc["targetPort"]] == int(flag(epp["args"], "grpc-port"))
    assert grpc["appProtocol"] == "kubernetes.io/h2c"
    assert (
        service["spec"]["selector"].items()
        <= picker["spec"]["template"]["metadata"]["labels"].items()
    )
    assert flag(epp["args"], "pool-name") == pool["metadata"]["name"]
    assert flag(epp["args"], "pool-group") == pool["apiVersion"].split("/")[0]
    probe = epp["readinessProbe"]["grpc"]["port"]
    assert probe == int(flag(epp["args"], "grpc-health-port"))
    # Its service account may read the pool and the pods it routes to.
    role, binding = found["Role"], found["RoleBinding"]
    granted = {
        (group, resource)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if "watch" in rule["verbs"]
    }
    assert {("", "pods"), ("inference.networking.k8s.io", "inferencepools")} <= granted
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = picker["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account}]
    assert found["ServiceAccount"]["metadata"]["name"] == account


def test_the_picker_reads_its_configuration_from_the_config_map() -> None:
    found = gateway()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    config_file = PurePosixPath(flag(container(pod)["args"], "config-file"))
    volume = mounts(pod)[str(config_file.parent)]
    config_map = found["ConfigMap"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert config_file.name == endpoint_picker.CONFIG_FILE in config_map["data"]


# The router's configuration keys (llm-d-router v0.10, apix/config/v1alpha1 and the extractor's
# parameters): the router ignores unknown keys, so a misspelled one would silently be a default.
PICKER_KEYS = {"apiVersion", "kind", "plugins", "schedulingProfiles", "dataLayer", "featureGates"}
PLUGIN_KEYS = {"name", "type", "parameters"}
EXTRACTOR_KEYS = {"engineLabelKey", "defaultEngine", "engineConfigs"}
ENGINE_KEYS = {
    "name",
    "queuedRequestsSpec",
    "runningRequestsSpec",
    "kvUsageSpec",
    "loraSpec",
    "cacheInfoSpec",
    "cacheBlockSizeLabelName",
    "cacheNumBlocksLabelName",
    "cacheBlockSizeSpec",
    "cacheNumBlocksSpec",
    "customMetrics",
}


def test_the_picker_configuration_is_whole() -> None:
    config = endpoint_picker.picker_config()
    assert (config["apiVersion"], config["kind"]) == ("llm-d.ai/v1alpha1", "EndpointPickerConfig")
    assert set(config) <= PICKER_KEYS
    assert all(set(plugin) <= PLUGIN_KEYS for plugin in config["plugins"])
    names = {plugin.get("name", plugin["type"]) for plugin in config["plugins"]}
    assert len(names) == len(config["plugins"]), "two plugins share a name"
    references = [
        entry["pluginRef"]
        for profile in config["schedulingProfiles"]
        for entry in profile["plugins"]
    ] + [
        ref["pluginRef"]
        for source in config["dataLayer"]["sources"]
        for ref in [source, *source["extractors"]]
    ]
    assert set(references) <= names, sorted(set(references) - names)
    (profile,) = config["schedulingProfiles"]
    weights = {entry["pluginRef"]: entry.get("weight") for entry in profile["plugins"]}
    for scorer in (
        "queue-scorer",
        "kv-cache-utilization-scorer",
        "prefix-cache-scorer",
        "lora-affinity-scorer",
    ):
        assert weights[scorer] > 0, scorer
    parameters = endpoint_picker.extractor_parameters(config)
    assert set(parameters) <= EXTRACTOR_KEYS
    assert all(set(engine) <= ENGINE_KEYS for engine in parameters["engineConfigs"])


def test_the_picker_reads_metrics_graphrt_defines_with_the_protocols_types() -> None:
    """Each spec of the graphrt engine configuration names a gauge the server defines (the
    docs reference lists every one), and the pods carry the label that selects it."""
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "tools" / "docs_reference.py"
    )
    assert spec is not None and spec.loader is not None
    reference = importlib.util.module_from_spec(spec)
    sys.modules["docs_reference"] = reference  # its dataclasses look their module up
    spec.loader.exec_module(reference)
    defined = {metric.name: metric.type for metric in reference.metrics()}
    specs = endpoint_picker.engine_specs()
    assert set(specs) == {
        "queuedRequestsSpec",
        "runningRequestsSpec",
        "kvUsageSpec",
        "loraSpec",
        "cacheInfoSpec",
    }
    for field, text in specs.items():
        spec = endpoint_picker.parse_spec(text)
        assert defined.get(spec.name) == "gauge", (
            f"{field}: {spec.name} is not a gauge graphrt defines"
        )
        assert not spec.labels, f"{field}: one series per server, no selector needed"
    parameters = endpoint_picker.extractor_parameters()
    pod_labels = resources()["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert pod_labels[parameters["engineLabelKey"]] == endpoint_picker.ENGINE
    assert parameters["defaultEngine"] == endpoint_picker.ENGINE


def test_replicas_give_the_kv_scorer_a_cache_of_fixed_size() -> None:
    """With cache_size 0 the KV cache grows on demand and its use reads as full whenever it is
    in use: the kv-cache-utilization scorer needs a size."""
    job = container(resources()["Job"]["spec"]["template"]["spec"])
    exported = build_parser().parse_args([*job["command"][1:], *job["args"]])
    assert exported.cache_size > 0
