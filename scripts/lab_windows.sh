# lab: window lengths for the overlapped windows
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=/tmp/site LD_LIBRARY_PATH=$PWD/.devbuild/lib:/usr/local/cuda/lib64
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
timeout 250 python3 bench/bench_prefill.py --lib $PWD/.devbuild/lib/libgdn.so --out $OUT --rep 30 \
  --cases prefill-1x4096,prefill-1x16384,prefill-1x65536,prefill-1x32768-hv64 \
  --forms split:1:0,split:1:8,split:1:16,split:1:64 2>&1 | sed -n '/^results/,$p'
