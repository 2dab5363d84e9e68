"""OVMS's command-line modes besides serving, on `graphrt serve` (and plain `graphrt`).

`--source_model` pulls a model from Hugging Face and serves it (`--pull`: pull only, see
pull.py; to serve, the server pulls once it listens, as OVMS does); `--configure` writes a
local model's graph.pbtxt from the task flags without serving; `--list_models`,
`--add_to_config` and `--remove_from_config` manage a model repository and its config.json
(config_management.py). The flags and their checks are OVMS's (docs/parameters.md), so its
quick starts run with `graphrt` in place of `ovms`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from graphrt.cli import config_management as configs
from graphrt.cli.classic import model_options
from graphrt.cli.pull import PullError, PullRequest, pull
from graphrt.server import ModelFetch, StartupError, generated_graph
from graphrt.serving.settings import ServerSettings

logger = logging.getLogger("graphrt")


def add_ovms_mode_arguments(serve: argparse.ArgumentParser) -> None:
    modes = serve.add_argument_group("OVMS's pull, configure and config management modes")
    modes.add_argument("--source_model", help="Hugging Face model to pull and serve (org/name)")
    modes.add_argument(
        "--model_repository_path",
        help=f"where pulled models go and --list_models looks (default ${configs.REPOSITORY_ENV})",
    )
    modes.add_argument("--pull", action="store_true", help="pull --source_model, do not serve")
    modes.add_argument("--gguf_filename", help="the .gguf file of a GGUF repository to pull")
    modes.add_argument(
        "--overwrite_models", action="store_true", help="pull again over a model already there"
    )
    modes.add_argument(
        "--weight-format",
        "--weight_format",
        dest="weight_format",
        default="int8",
        choices=["fp32", "fp16", "int8", "int4", "mxfp4", "nf4"],
        help="weights of a model converted with optimum-cli (default int8)",
    )
    modes.add_argument(
        "--extra_quantization_params", default="", help="more optimum-cli export arguments"
    )
    modes.add_argument(
        "--configure", action="store_true", help="write --model_path's graph.pbtxt, do not serve"
    )
    modes.add_argument("--list_models", action="store_true", help="list a repository's models")
    modes.add_argument(
        "--add_to_config", action="store_true", help="add --model_name to config.json"
    )
    modes.add_argument(
        "--remove_from_config", action="store_true", help="remove --model_name from config.json"
    )


def _refuse(args: argparse.Namespace) -> None:
    """OVMS's rules for which modes go together."""
    pulling = bool(args.source_model) or args.pull
    for mode in ("list_models", "add_to_config", "remove_from_config"):
        if getattr(args, mode) and (pulling or args.task):
            raise StartupError(f"--{mode} cannot be used with --pull, --source_model or --task")
    if args.list_models and (args.add_to_config or args.remove_from_config):
        raise StartupError(
            "--list_models cannot be used with --add_to_config or --remove_from_config"
        )
    if args.remove_from_config and args.model_path:
        raise StartupError("--model_path cannot be used with --remove_from_config")
    if args.configure and not args.model_path:
        raise StartupError("--configure requires --model_path")
    if args.configure and (pulling or args.model_name):
        raise StartupError("--configure cannot be used with --pull, --source_model or --model_name")
    if args.pull and not args.source_model:
        raise StartupError("--pull requires --source_model")


def run_mode(args: argparse.Namespace, settings: ServerSettings) -> int | None:
    """Do the mode the flags ask for: an exit status, or None to go on and serve (a
    `--source_model` is then pulled by the running server: `model_fetch`)."""
    _refuse(args)
    try:
        if args.list_models:
            repository = configs.default_repository(args.model_repository_path)
            if repository is None:
                raise StartupError("--list_models needs --model_repository_path")
            for name in configs.list_models(repository):
                print(name)
            return 0
        if args.add_to_config or args.remove_from_config:
            if not args.model_name:
                raise StartupError("--model_name is needed to change config.json")
            config_path = configs.config_file(args.config_path)
            if args.add_to_config:
                repository = configs.default_repository(args.model_repository_path)
                base = configs.model_base_path(
                    config_path, args.model_name, args.model_path, repository
                )
                configs.add_to_config(config_path, args.model_name, base, model_options(args))
            else:
                configs.remove_from_config(config_path, args.model_name)
            print(f"Config updated: {config_path}")
            return 0
        if args.configure:
            path = Path(args.model_path)
            text = generated_graph(settings, path.resolve(), "./")
            (path / "graph.pbtxt").write_text(text, encoding="utf-8")
            print(f"Graph written: {path / 'graph.pbtxt'}")
            return 0
        if args.pull:
            print(f"Model pulled: {_pull(args, settings)()}", file=sys.stdout)
            return 0
    except configs.ConfigManagementError as error:
        raise StartupError(str(error)) from None
    return None


def _pull(args: argparse.Namespace, settings: ServerSettings) -> Callable[[], Path]:
    """The pull `--source_model` asks for, checked now and run when called."""
    repository = configs.default_repository(args.model_repository_path)
    if repository is None:
        raise StartupError("--source_model needs --model_repository_path (where models go)")
    request = PullRequest(
        source_model=args.source_model,
        repository=repository,
        gguf_filename=args.gguf_filename,
        overwrite_models=args.overwrite_models,
        weight_format=args.weight_format,
        extra_quantization_params=args.extra_quantization_params,
        task=args.task,
    )

    def run() -> Path:
        try:
            return pull(request, lambda path, where: generated_graph(settings, path, where))
        except PullError as error:
            raise StartupError(str(error)) from None

    return run


def model_fetch(args: argparse.Namespace, settings: ServerSettings) -> ModelFetch | None:
    """OVMS's pull-and-start: the model `--source_model` names, fetched by the running server
    (graphrt.server), so probes see it live and loading through a long download."""
    if not args.source_model or args.pull:
        return None
    name = args.model_name or args.source_model
    return ModelFetch(name, f"pulling {args.source_model}", _pull(args, settings))
