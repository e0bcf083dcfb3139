"""The examples in the docstrings run, and every public name has a docstring."""

import doctest

import roce
import roce.layers


def test_doctests():
    for m in (roce, roce.layers):
        r = doctest.testmod(m)
        assert r.failed == 0 and r.attempted > 0, m


def test_every_public_name_is_documented():
    missing = [n for n in roce.__all__ if not (getattr(roce, n).__doc__ or "").strip()]
    assert not missing, missing
    assert "dest_qp" in roce.BTH.__doc__ and "q_key" in roce.DETH.__doc__


def test_dataframe_says_what_is_missing_without_pandas(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pandas(name, *a, **k):
        if name in ("pandas", "numpy"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    try:
        roce.dataframe("x.pcap")
    except ImportError as e:
        assert "pip install pandas" in str(e)
    else:
        raise AssertionError("no ImportError")
