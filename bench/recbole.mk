# bench/recbole.mk - `make bench-recbole`: time to RecBole's own test NDCG@10
# (RecBole 1.2.1 SASRec, MovieLens-100K, leave-one-out, full ranking), RecBole
# and seqrec in the same run (bench/bench-recbole.sh). RecBole is an optional
# dependency: installed from PyPI into bench/.venv, a virtual environment over
# the system python3's torch (RECBOLE_PYTHON=... to use another interpreter);
# without it (no network) the bench is skipped with a message.
# RECBOLE_EPOCHS=N caps RecBole's epochs (default 10; EPOCHS is the
# pipelines' 200), RECBOLE_SEQREC_EPOCHS seqrec's (default 30) in each mode.
.PHONY: bench-recbole
RECBOLE_VENV := bench/.venv
RECBOLE_EPOCHS ?= 10
RECBOLE_SEQREC_EPOCHS ?= 30
BENCH_ML100K := data/raw/ml-100k.zip
# What recbole 1.2.1 imports besides torch, numpy and yaml (not ray or
# plotly: the bench uses no quick_start); --no-deps for recbole and thop so
# that pip never brings a second torch.
# numpy<2: Debian's torch 1.13 is built against numpy 1 and fails
# ("Numpy is not available") beside a numpy 2 that pip would bring.
RECBOLE_PIP_DEPS := 'numpy<2' scipy pandas tqdm colorlog colorama scikit-learn tensorboard texttable tabulate psutil
# The interpreter the venv is made over: the first python3 that imports
# torch (a pyenv or conda python3 first in PATH may lack Debian's torch).
RECBOLE_BASE_PY = $(shell for p in python3 /usr/bin/python3; do \
  $$p -c 'import torch' 2>/dev/null && command -v $$p && break; done)
bench-recbole: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(BENCH_OUT)
	@[ -f $(BENCH_ML100K) ] || $(DATA_MAKE) ml-100k
	@if [ -z "$(RECBOLE_PYTHON)" ] && ! $(RECBOLE_VENV)/bin/python -c 'import recbole.trainer' 2>/dev/null; then \
	  echo "bench-recbole: installing RecBole 1.2.1 into $(RECBOLE_VENV)"; \
	  { [ -n "$(RECBOLE_BASE_PY)" ] && $(RECBOLE_BASE_PY) -m venv --system-site-packages $(RECBOLE_VENV) && \
	    $(RECBOLE_VENV)/bin/pip install -q --no-deps recbole==1.2.1 thop && \
	    $(RECBOLE_VENV)/bin/pip install -q $(RECBOLE_PIP_DEPS); } >/dev/null 2>&1 || \
	  echo "bench-recbole: skipped: could not make $(RECBOLE_VENV) with recbole 1.2.1 over python3's torch (no torch or no network?)"; \
	fi
	@rm -f $(BENCH_OUT)/recbole.csv
	EPOCHS=$(RECBOLE_EPOCHS) SEQREC_EPOCHS=$(RECBOLE_SEQREC_EPOCHS) RECBOLE_PYTHON=$(RECBOLE_PYTHON) sh bench/bench-recbole.sh $(BUILD)/bin $(BENCH_OUT)/recbole.csv $(BENCH_ML100K)
	@[ ! -f $(BENCH_OUT)/recbole.csv ] || echo "bench-recbole: results in $(BENCH_OUT)/recbole.csv"
