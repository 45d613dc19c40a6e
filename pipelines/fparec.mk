# pipelines/fparec.mk - FPARec (fparec.txt) Table 3, SASRec rows, with the
# paper's protocol (PROTOCOLS.md): S3-Rec Beauty and Sports, leave-one-out,
# full ranking over all items, history not excluded, every user scored
# (the paper's code scores a random 10,000 when there are more).
#
#   make reproduce-fparec-sasrec DATA_MIRROR=../shared/data
#
# Trains SASRec with full cross-entropy (the code's sparse_ce) and with BCE
# and one negative, N=50, d=64 (ffn = d, as the code), 2 layers, 1 head,
# dropout 0.5, and prints test HR@10/NDCG@10 next to the paper's cells.
# Hours on 2 CPU cores (a CE epoch on Beauty: ~20 s); outputs in repro/fparec/.
FPAREC_OUT := repro/fparec
FPAREC_BIN := $(BUILD)/bin
FPAREC_TRAIN := --model sasrec --max-len 50 --dim 64 --ffn 64 --layers 2 --heads 1 \
  --dropout 0.5 --lr 1e-3 --beta2 0.98 --batch 128 --epochs 200 --eval-every 2 --patience 10 \
  --seed 1 --threads 2

.PHONY: reproduce-fparec-sasrec
reproduce-fparec-sasrec: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(FPAREC_OUT)
	@$(MAKE) --no-print-directory -C data beauty sports
	@for ds in Beauty Sports_and_Outdoors; do \
	  $(FPAREC_BIN)/seqrec-preprocess --format s3rec --stats data/raw/$$ds.txt.gz \
	    | $(FPAREC_BIN)/seqrec-split --leave-one-out -o $(FPAREC_OUT)/$$ds.split || exit 1; \
	  for loss in ce bce; do \
	    $(FPAREC_BIN)/seqrec-train $(FPAREC_TRAIN) --loss $$loss --neg 1 --log $(FPAREC_OUT)/$$ds-$$loss.log \
	      -o $(FPAREC_OUT)/$$ds-$$loss.sqm $(FPAREC_OUT)/$$ds.split || exit 1; \
	    $(FPAREC_BIN)/seqrec-score -m $(FPAREC_OUT)/$$ds-$$loss.sqm --target test $(FPAREC_OUT)/$$ds.split \
	      | $(FPAREC_BIN)/seqrec-metrics -k 10 --json > $(FPAREC_OUT)/$$ds-$$loss.json || exit 1; \
	  done; \
	done
	@printf '%-24s %8s %8s   %s\n' run HR@10 NDCG@10 "paper SASRec (CE)"
	@for r in "Beauty-ce 0.0813/0.0405" "Beauty-bce -" "Sports_and_Outdoors-ce 0.0460/0.0233" "Sports_and_Outdoors-bce -"; do \
	  set -- $$r; f=$(FPAREC_OUT)/$$1.json; \
	  printf '%-24s %8s %8s   %s\n' $$1 $$(sed 's/.*"hr@10": \([0-9.]*\).*/\1/' $$f) \
	    $$(sed 's/.*"ndcg@10": \([0-9.]*\).*/\1/' $$f) $$2; \
	done
