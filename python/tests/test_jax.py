"""JAX arrays (CPU) through DLPack: inputs, and outputs allocated as JAX arrays. Skipped where
JAX is not installed."""

import numpy as np
import pytest

import gdn
from recurrence import inputs, random_state, recurrence, rel_err

jnp = pytest.importorskip("jax.numpy")


def test_forward_on_jax_arrays():
    q, k, v, g, beta = inputs(2, 5, 2, 4, 16, 8, seed=50)
    h0 = random_state(2, 4, 8, 16)
    o, ht, _ = gdn.forward(*(jnp.asarray(x) for x in (q, k, v, g, beta)),
                           initial_state=jnp.asarray(h0), output_final_state=True)
    assert type(o).__module__.startswith("jax") and o.dtype == jnp.float32
    ref_o, ref_s, _ = recurrence(q, k, v, g, beta, initial_state=h0)
    assert rel_err(np.asarray(o), ref_o) <= 1e-5
    assert rel_err(np.asarray(ht), ref_s) <= 1e-5
