# bench/bench.mk - `make bench` and its parts
bench: bench-data
bench-data: all
	@echo "bench-data: not wired yet"
