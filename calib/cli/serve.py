"""``calib serve``: serve a local Hugging Face causal LM over HTTP with vLLM's and TGI's routes."""

from __future__ import annotations

import asyncio
import ipaddress
import signal
from pathlib import Path

import click

from calib._exceptions import CalibError, InputError
from calib.servers.embedded import check_model_dir

_LOOPBACK = "127.0.0.1"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _run(model, host: str, port: int, name: str) -> None:  # model: EmbeddedModel
    from aiohttp import web

    from calib.servers.embedded.app import make_app

    runner = web.AppRunner(make_app(model, served_name=name), handle_signals=False, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        bound = port
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            bound = server.sockets[0].getsockname()[1]
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        click.echo(f"calib serve: {name} at http://{host}:{bound} (OpenAI /v1 and TGI routes)", err=True)
        await stop.wait()
    finally:
        await runner.cleanup()


@click.command("serve")
@click.argument("model_dir", type=click.Path(path_type=Path))
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="TCP port (0: any free port; the line printed once listening says which).")
@click.option("--host", default=None,
              help="Address to listen on. Default 127.0.0.1; any other address exposes the model to the "
                   "network without authentication.")
@click.option("--name", default=None, help="Model name clients send and responses report. Default: MODEL_DIR's name.")
@click.option("--max-model-len", type=click.IntRange(min=1), default=None,
              help="Context limit in tokens (prompt plus completion). Default: the model's positions.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Torch CPU threads. Default: torch's.")
def serve(model_dir: Path, port: int, host: str | None, name: str | None, max_model_len: int | None,
          threads: int | None) -> None:
    """Serve the Hugging Face-format causal LM in MODEL_DIR on the CPU over HTTP.

    Clients reach it as vLLM (the openai SDK at http://HOST:PORT/v1: completions with echo and
    prompt_logprobs, chat, embeddings, /tokenize, /detokenize) or as TGI (the text-generation client at
    http://HOST:PORT: /generate with details, /tokenize, /info). Stops on Ctrl-C or SIGTERM.
    """
    model_dir = check_model_dir(model_dir)  # before importing torch: a bad path fails at once
    if host is None:
        host = _LOOPBACK
    elif not _is_loopback(host):
        click.echo(f"calib serve: warning: listening on {host} exposes the model to anyone who can reach this "
                   "machine, without authentication", err=True)
    from calib.servers.embedded.model import EmbeddedModel

    try:
        model = EmbeddedModel(model_dir, max_model_len=max_model_len, threads=threads)
    except CalibError:
        raise
    except Exception as exc:  # transformers' errors for a broken config, weights or tokenizer
        raise InputError(f"cannot load the model: {type(exc).__name__}: {exc}", path=str(model_dir)) from exc
    asyncio.run(_run(model, host, port, name or model_dir.name))
