"""Slider figures, part 1: the knobs, the points they show, and the precomputed grid.

A chapter names its sliders (:class:`Knob`: the learning rate, the batch size, the number of
runs ...), computes a :class:`SliderGrid` over every combination of their grid values with
:func:`compute_grid` (a :class:`SliderPoint` each: curves, marked points, a caption) and hands
it to :func:`flowlaws.book.interactive.interactive_figure`. The two views that draw a grid
live in :mod:`flowlaws.book.vega` (the static book) and :mod:`flowlaws.book.live` (a kernel).

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from flowlaws.book.cache import stored_type
from flowlaws.book.progress import track

__all__ = [
    "Key",
    "RESERVED_NAMES",
    "KEY_DIGITS",
    "round_key",
    "SliderPoint",
    "Knob",
    "SliderGrid",
    "compute_grid",
    "GridPointError",
]


Key = tuple[float, ...]


# the fields of the chart's rows
RESERVED_NAMES = ("x", "y", "series", "kind", "setting", "caption")


KEY_DIGITS = 10  # significant digits a knob's value keeps: grid values, keys and lookups


def _rounded(value: float) -> float:
    return float(f"{float(value):.{KEY_DIGITS}g}")


def round_key(key: Sequence[float]) -> Key:
    """``key`` rounded as the grid rounds its values (:data:`KEY_DIGITS` significant digits),
    so that a float's last bit (``0.3000000000000001``) finds the grid point ``0.3``."""
    return tuple(_rounded(v) for v in key)


@stored_type
@dataclass
class SliderPoint:
    """What the figure shows at one position of the sliders.

    Attributes:
        x: ``(P,)`` abscissae shared by the curves.
        curves: label → ``(P,)`` ordinates.
        marks: ``(K, 2)`` points ``(x, y)`` to mark (detected peaks, say); may be empty.
        caption: one line printed with the figure (``"λ = 2.1 ± 0.3"``).
        others: ``(J, 2)`` a second set of points, drawn apart from ``marks`` (another symbol
            and colour: the local maxima a detector did not select, say); may be empty.
        mark_labels: the legend's names of ``marks`` and ``others``.
    """

    x: np.ndarray
    curves: dict[str, np.ndarray]
    marks: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    caption: str = ""
    others: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    mark_labels: tuple[str, str] = ("marked", "other")

    def mark_sets(self) -> dict[str, np.ndarray]:
        """``{label: (K, 2) points}`` of ``marks`` then ``others``, as the views draw them."""
        return {label: np.asarray(points, dtype=float).reshape(-1, 2) for label, points in
                zip(self.mark_labels, (self.marks, self.others), strict=True)}


@dataclass
class Knob:
    """One slider: the keyword it passes to the compute function and its grid of values.

    Attributes:
        name: a Python identifier, the keyword argument of ``compute`` (``"lr"``).
        values: ``(S,)`` increasing grid values, at least 2, rounded to :data:`KEY_DIGITS`
            significant digits (a value written in the text is kept exactly).
        default: the position discussed in the text (snapped to the nearest grid value;
            ``None``: the middle one).
        log: the slider moves evenly in ``log10`` of the value.
        integer: the values are whole numbers (batch size, number of runs); ``compute``
            receives an ``int``.
        label: shown beside the slider (default: ``name``).
    """

    name: str
    values: Sequence[float]
    default: float | None = None
    log: bool = False
    integer: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name in RESERVED_NAMES:
            raise ValueError(f"knob name must be an identifier other than {RESERVED_NAMES}, "
                             f"got {self.name!r}")
        self.values = np.asarray(self.values, dtype=float)
        if self.values.ndim != 1 or len(self.values) < 2:
            raise ValueError(f"knob {self.name!r} needs at least 2 values, got {self.values}")
        self.values = np.array([_rounded(v) for v in self.values])
        if np.any(np.diff(self.values) <= 0):
            raise ValueError(f"the values of knob {self.name!r} must increase: {self.values}")
        if self.log and np.any(self.values <= 0):
            raise ValueError(f"log knob {self.name!r} needs positive values: {self.values}")
        if self.integer and np.any(self.values != np.round(self.values)):
            raise ValueError(f"integer knob {self.name!r} has fractional values: {self.values}")
        self.label = self.label or self.name
        middle = self.values[len(self.values) // 2]
        self.default = float(self.values[self.index_of(middle if self.default is None
                                                       else self.default)])

    def index_of(self, value: float) -> int:
        """Index of the grid value nearest to ``value`` (in log space for a log knob)."""
        return int(np.argmin(np.abs(self._axis() - (np.log10(value) if self.log else value))))

    def cast(self, value: float) -> float | int:
        """``value`` as ``compute`` receives it: an ``int`` for an integer knob."""
        return int(round(value)) if self.integer else float(value)

    def _axis(self) -> np.ndarray:
        return np.log10(self.values) if self.log else self.values

    def _evenly_spaced(self) -> bool:
        steps = np.diff(self._axis())
        return bool(np.allclose(steps, steps.mean(), rtol=1e-3, atol=0))

    def positions(self) -> np.ndarray:
        """``(S,)`` positions of the static slider, equally spaced by :meth:`step`.

        A grid evenly spaced in its values (or in ``log10`` of them for a log knob) moves over
        those numbers, rounded to 6 significant digits so that the browser's range input can
        land on every one of them; any other grid moves over the grid index ``0 … S−1``.
        """
        if not self._evenly_spaced():
            return np.arange(len(self.values), dtype=float)
        return np.round(self._axis()[0] + self.step() * np.arange(len(self.values)), 9)

    def step(self) -> float:
        """The spacing of :meth:`positions`."""
        return float(f"{np.diff(self._axis()).mean():.6g}") if self._evenly_spaced() else 1.0

    def slider_label(self) -> str:
        """The static slider's label. Its own readout (a log or a grid index) is hidden: the
        chart prints the knobs' values above the caption instead."""
        return f"{self.label} "

    def live_values(self, between: int = 3) -> np.ndarray:
        """The values the live view offers when off-grid points can be computed (its slider
        keeps to the grid values; a menu beside it holds the values between).

        Every grid value, exactly, and in each interval up to ``between`` values evenly spaced
        (in ``log10`` for a log knob), each rounded to the fewest significant digits that
        keep it within a quarter of that spacing (whole numbers for an integer knob): 0.024,
        0.028, 0.034 between 0.02 and 0.04; 0.11, 0.125, 0.14 between 0.1 and 0.15.
        """
        values = [float(self.values[0])]
        for lo, hi in zip(self.values[:-1], self.values[1:], strict=True):
            values += [*_between(lo, hi, between, self.log, self.integer), float(hi)]
        return np.array(values)

    def labels(self, values: Sequence[float]) -> list[str]:
        """The live slider's readout of ``values``, as the text writes them (``f"{v:g}"``:
        0.04, 1e-05; an integer knob's as whole numbers)."""
        if self.integer:
            return [str(int(round(v))) for v in values]
        labels = [f"{v:g}" for v in values]
        return labels if len(set(labels)) == len(labels) else [f"{v:.{KEY_DIGITS}g}"
                                                              for v in values]


def _between(lo: float, hi: float, n: int, log: bool, integer: bool) -> list[float]:
    """Up to ``n`` short values strictly between ``lo`` and ``hi`` (see Knob.live_values)."""
    inside = (np.geomspace(lo, hi, n + 2) if log else np.linspace(lo, hi, n + 2))[1:-1]
    if integer:
        return [float(v) for v in np.unique(np.round(inside)) if lo < v < hi]
    axis = np.log10 if log else float
    tolerance = (axis(hi) - axis(lo)) / (n + 1) / 4  # a quarter of the even spacing

    def short(v: float) -> float:  # within the tolerance, so the values stay apart and inside
        fits = (s for d in range(1, KEY_DIGITS + 1)
                if abs(axis(s := float(f"{v:.{d}g}")) - axis(v)) <= tolerance)
        return next(fits, _rounded(v))

    return [short(v) for v in inside]


@dataclass
class SliderGrid:
    """Precomputed :class:`SliderPoint` s at every combination of the knobs' grid values.

    ``points`` maps a key, the tuple of the knobs' values in the order of ``knobs``, to its
    point; every combination must be there. ``x_domain``: the x axis's fixed span,
    ``(lo, hi)``; what lies outside is not drawn (a fitted ``p_c`` beyond the data, which would
    stretch an axis of ``p ≤ 1`` to 1.85); ``None``: the span of everything drawn.
    """

    knobs: list[Knob]
    points: dict[Key, SliderPoint]
    x_label: str = "x"
    y_label: str = "y"
    log_x: bool = False
    log_y: bool = False
    title: str = ""
    x_domain: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        self.knobs = _knob_list(self.knobs)
        if self.x_domain is not None:
            lo, hi = map(float, self.x_domain)
            if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi) or (self.log_x and lo <= 0):
                raise ValueError(f"x_domain must be (lo, hi) with lo < hi (lo > 0 on a log "
                                 f"axis), got {self.x_domain!r}")
            self.x_domain = (lo, hi)
        names = [k.name for k in self.knobs]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"a grid needs one or more knobs with distinct names, got {names}")
        expected = set(self.keys())
        self.points = {round_key(key): p for key, p in self.points.items()}
        if set(self.points) != expected:
            missing = sorted(expected - set(self.points))[:3]
            raise ValueError(f"the grid must hold every combination of {names}; missing "
                             f"{missing}, extra {sorted(set(self.points) - expected)[:3]}")

    def keys(self) -> list[Key]:
        """Every combination of the knobs' values, the first knob varying slowest."""
        return _keys(self.knobs)

    @property
    def default_key(self) -> Key:
        return tuple(k.default for k in self.knobs)

    def describe(self, key: Key) -> str:
        """``"lr = 0.1, B = 4"``: the knobs' labels and values."""
        return ", ".join(f"{k.label} = {v:.4g}" for k, v in zip(self.knobs, key, strict=True))

    def arguments(self, key: Key) -> dict[str, float | int]:
        """The keyword arguments ``compute`` receives for ``key``."""
        return _arguments(self.knobs, key)


def _knob_list(knobs: Knob | Sequence[Knob]) -> list[Knob]:
    return [knobs] if isinstance(knobs, Knob) else list(knobs)


def _keys(knobs: Sequence[Knob]) -> list[Key]:
    return [tuple(map(float, key)) for key in itertools.product(*(k.values for k in knobs))]


def _arguments(knobs: Sequence[Knob], key: Key) -> dict[str, float | int]:
    return {k.name: k.cast(v) for k, v in zip(knobs, key, strict=True)}


class GridPointError(RuntimeError):
    """Points of a slider grid failed. ``failures`` maps each failed point's key to its error;
    ``points`` holds the finished points: pass them back as ``compute_grid(..., done=...)`` to
    compute only what is missing."""

    def __init__(self, message: str, failures: dict[Key, BaseException],
                 points: dict[Key, SliderPoint]) -> None:
        super().__init__(message)
        self.failures, self.points = failures, points


def compute_grid(
    compute: Callable[..., SliderPoint], knobs: Knob | Sequence[Knob], *, progress: bool = True,
    done: dict[Key, SliderPoint] | None = None, **grid_options,
) -> SliderGrid:
    """Call ``compute(**{knob.name: value, ...})`` at every combination of the knobs' values.

    The first knob varies slowest, so a ``compute`` that caches one expensive run per value of
    the first knob and slices it for the others (the number of runs, say) does each run once.
    ``grid_options`` go to :class:`SliderGrid`; a tqdm bar counts the points when ``progress``.
    A point that fails does not throw the others away: every other point is computed, then
    :class:`GridPointError` names each failed point by its knobs' values and keeps the
    finished ones (``error.points``; ``done=error.points`` skips them in the next call).
    """
    knobs = _knob_list(knobs)
    points = {round_key(k): p for k, p in (done or {}).items()}
    failures: dict[Key, BaseException] = {}
    for key in track(_keys(knobs), desc="slider grid", enabled=progress):
        if round_key(key) in points:
            continue
        try:
            points[round_key(key)] = compute(**_arguments(knobs, key))
        except Exception as error:  # noqa: BLE001 - named below, with the finished points kept
            failures[key] = error
    if failures:
        named = "; ".join(
            ", ".join(f"{k.name}={v:g}" for k, v in zip(knobs, key, strict=True))
            + f" ({type(e).__name__}: {e})" for key, e in failures.items())
        first = next(iter(failures.values()))
        raise GridPointError(f"{len(failures)} of {len(_keys(knobs))} slider points failed: "
                             f"{named}. The {len(points)} finished points are kept in "
                             "error.points (compute_grid(..., done=error.points) computes only "
                             "the rest)", failures, points) from first
    return SliderGrid(knobs=knobs, points=points, **grid_options)
