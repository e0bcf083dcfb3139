"""roce.dataframe: a capture's flat fields as a pandas DataFrame."""

from __future__ import annotations

import os
from typing import IO, Any, Union

from ._roce import read_columns


def dataframe(source: Union[str, os.PathLike, IO[bytes]]) -> Any:
    """A pandas DataFrame with one row per frame of a pcap/pcapng capture and one column per
    flat field of ``roce decode --json`` (``frame``, ``time``, ``ip.src``, ``bth.psn``,
    ``reth.va``, ``mcmember.mgid`` …). Integer columns with gaps (a field only some frames
    have) use pandas' nullable ``Int64``; booleans with gaps ``boolean``.

    Raises ImportError when pandas is not installed (``pip install pandas``)."""
    try:
        import numpy as np
        import pandas as pd
    except ImportError as e:  # the package itself needs neither
        raise ImportError(
            "roce.dataframe needs pandas: pip install pandas (or pip install 'roce[pandas]')"
        ) from e
    columns = read_columns(source)
    data = {}
    for name, (kind, values, valid) in columns.items():
        if kind == "i":
            v = np.frombuffer(values, dtype="<i8")
            m = np.frombuffer(valid, dtype=np.uint8).astype(bool)
            data[name] = v.copy() if m.all() else pd.arrays.IntegerArray(v.copy(), ~m)
        elif kind == "f":
            data[name] = np.frombuffer(values, dtype="<f8").copy()
        elif kind == "b":
            v = np.frombuffer(values, dtype=np.uint8).astype(bool)
            m = np.frombuffer(valid, dtype=np.uint8).astype(bool)
            data[name] = v if m.all() else pd.arrays.BooleanArray(v, ~m)
        else:
            data[name] = pd.array(values, dtype=object)
    # The arrays are this call's own: no copy (pandas copies a dict's arrays by default).
    return pd.DataFrame(data, copy=False)
