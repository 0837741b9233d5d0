"""How every plot looks: colour-blind-safe colours, readable sizes, one figure size.

Colours are the Okabe-Ito palette (distinguishable with every common colour-vision
deficiency, and in grey scale by their lightness); series also differ by marker and line
style, so no plot relies on colour alone. Heat maps use ``cividis``, a colour map made to
read the same to people with and without deficiencies. Sizes are in inches at 100 dpi: a
figure is 7 x 3.6 in, which fills a laptop column and half a printed A4/Letter page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # the catalog imports the figures module without matplotlib
    from matplotlib.typing import RcKeyType

OKABE_ITO: Final = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
ENSEMBLE: Final = "#D55E00"  # the ensemble's own score, beside its members' (vermillion)
MEMBER: Final = "#0072B2"  # members (blue)
NEUTRAL: Final = "#555555"
MARKERS: Final = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES: Final = ("-", "--", "-.", ":")
HEATMAP: Final = "cividis"
WIDTH_IN: Final = 7.0
HEIGHT_IN: Final = 3.6
DPI: Final = 100

RC: Final[dict[RcKeyType, Any]] = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica", "Liberation Sans"],
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "text.parse_math": False,  # labels are the user's strings: "$x^$" is text, not mathtext
    "text.usetex": False,
    "svg.fonttype": "none",  # text stays text: selectable, searchable, sharp, small
    "svg.hashsalt": "ensemble-service",  # ids in the SVG do not change from run to run
}


def rc() -> dict[RcKeyType, Any]:
    """matplotlib settings for every figure, colours cycling through the palette."""
    from cycler import cycler

    return {**RC, "axes.prop_cycle": cycler(color=list(OKABE_ITO))}


def color(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def marker(i: int) -> str:
    return MARKERS[i % len(MARKERS)]


def linestyle(i: int) -> str:
    return LINESTYLES[i % len(LINESTYLES)]
