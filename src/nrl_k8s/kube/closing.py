"""The ``with`` shape every client here shares (Kube, PodExec, the Ray dashboard and exec
drivers): entering gives the client itself, leaving closes it."""

from __future__ import annotations

from typing import Self


class Closing:
    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
