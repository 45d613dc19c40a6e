# pipelines/demo.mk - `make demo` (filled in below as programs land)
demo: deps all
	@echo "demo: not wired yet"
