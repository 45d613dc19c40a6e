# pipelines/repro_docs.mk - the reports' tables from the runs' outputs:
#
#   make repro-docs
#
# rewrites, in every doc/repro/*.md, each block between a line
# `<!-- include repro/PATH -->` and a line `<!-- end include -->` with the
# current repro/PATH that a reproduce-* target wrote (pipelines/repro_docs.sh);
# a block whose file is not there keeps its committed table. Each reproduce-*
# target ends with $(REPRO_DOCS) on its own report, so a new run updates it
# without a hand edit.
REPRO_DOCS := sh pipelines/repro_docs.sh

.PHONY: repro-docs
repro-docs:
	@$(REPRO_DOCS) doc/repro/*.md
