"""The committed rows of a result file read with h5py alone (enum columns as their labels): the
tests' independent reader, not scripts/prism_results.py."""
import h5py
import numpy as np


def read_rows(f):
    """(points, metrics, units) of the committed rows of the open h5py file `f`."""
    n = int(f.attrs["rows_committed"])
    points = {}
    for name, ds in f["points"].items():
        values = ds[:n]
        enum = h5py.check_enum_dtype(ds.dtype)
        if enum is not None:
            labels = {v: k for k, v in enum.items()}
            values = np.array([labels[int(v)] for v in values])
        points[name] = values
    metrics = {name: ds[:n] for name, ds in f["metrics"].items()}
    units = {name: ds.attrs["unit"] for name, ds in f["metrics"].items()}
    return points, metrics, units
