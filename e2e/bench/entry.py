"""What every benchmark's command line does the same way: print its report and save the
JSON, and stop everything it started on SIGTERM as on Ctrl-C."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


def publish(rendered: str, text: str, path: Path | None) -> None:
    """Print the table and the JSON ``text``; also write the JSON to ``path`` if given."""
    print(rendered)
    print(text)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(main: Callable[[], int]) -> NoReturn:
    """Exit with ``main()``'s code; SIGTERM cleans up as Ctrl-C does (a SIGKILL leaves only
    the temporary directory)."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped", file=sys.stderr)
        sys.exit(130)
