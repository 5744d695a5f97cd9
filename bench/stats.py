"""Summary statistics shared by the runner and the report."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

# Quantile points kept in results.json so that CDF plots can be redrawn without the raw samples; dense in the tail.
CDF_POINTS = [i / 2 for i in range(0, 198)] + [99 + i / 10 for i in range(0, 10)] + [99.9 + i / 100 for i in range(10)] + [100]


def summarize(values: Iterable[float], cdf: bool = False) -> dict[str, Any] | None:
    a = np.asarray(list(values), dtype=np.float64)
    if a.size == 0:
        return None
    out: dict[str, Any] = {
        "n": int(a.size),
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "mean": float(a.mean()),
        "max": float(a.max()),
        "min": float(a.min()),
    }
    if cdf:
        out["cdf"] = {"percent": CDF_POINTS, "value": [float(v) for v in np.percentile(a, CDF_POINTS)]}
    return out
