#!/usr/bin/env python3
"""recbole_run.py - train RecBole 1.2.1's SASRec on MovieLens-100K and time it.

Usage: recbole_run.py --zip ml-100k.zip --dir TMPDIR --config recbole.yaml
       [--epochs 10 --threads 2 --epochs-csv FILE]

Converts u.data of the zip to RecBole's atomic TMPDIR/ml100k/ml100k.inter
(user_id:token, item_id:token, rating:float, timestamp:float, in file order:
RecBole's stable sort by user and timestamp keeps ties in that order, as
seqrec-preprocess does), trains with the Trainer API (recbole.quick_start
imports ray, which the bench does not install) and prints CSV lines
"recbole,METRIC,VALUE": the median seconds of an epoch (training only, and
with validation), the best-validation epoch, the seconds from the start of
training to the end of that epoch (training and validation), and the test
NDCG@10 and HR@10 of the best-validation model, full ranking. With
--epochs-csv, one line an epoch: recbole,-,EPOCH,TRAIN_S,EPOCH_S,CUM_S,
VALID_NDCG10 (the columns of bench-recbole.sh's epoch table)."""
import argparse
import logging
import os
import sys
import time
import warnings
import zipfile

import numpy as np
import torch

# RecBole 1.2.1 aliases NumPy 1's removed names (np.float = np.float_, ...)
# when it reads its config; under NumPy 2 (python3's, with its torch) the
# aliases it reads from are given here.
for _old, _new in (("float_", "float64"), ("complex_", "complex128"), ("unicode_", "str_")):
    if not hasattr(np, _old):
        setattr(np, _old, getattr(np, _new))

from recbole.config import Config  # noqa: E402
from recbole.data import create_dataset, data_preparation  # noqa: E402
from recbole.model.sequential_recommender import SASRec  # noqa: E402
from recbole.trainer import Trainer  # noqa: E402
from recbole.utils import init_logger, init_seed  # noqa: E402


# Not "ml-100k": RecBole reads that name from the copy it ships
# (recbole/dataset_example/ml-100k, u.data's 100,000 lines in the same order),
# whatever data_path says.
DATASET = "ml100k"


def convert(zip_path, out_dir):
    """u.data (user, item, rating, timestamp; tabs) to DATASET.inter."""
    os.makedirs(out_dir, exist_ok=True)
    with zipfile.ZipFile(zip_path) as z, open(os.path.join(out_dir, DATASET + ".inter"), "w") as f:
        f.write("user_id:token\titem_id:token\trating:float\ttimestamp:float\n")
        for line in z.read("ml-100k/u.data").decode().splitlines():
            u, i, r, t = line.split("\t")
            f.write(f"{u}\t{i}\t{r}\t{t}\n")


class TimedTrainer(Trainer):
    """RecBole's Trainer with wall seconds of every training and validation
    epoch recorded (its own fit loop, unchanged)."""

    def __init__(self, config, model):
        super().__init__(config, model)
        self.train_s = []
        self.valid_s = []
        self.valid_ndcg = []

    def _train_epoch(self, train_data, epoch_idx, loss_func=None, show_progress=False):
        t0 = time.perf_counter()
        loss = super()._train_epoch(train_data, epoch_idx, loss_func, show_progress)
        self.train_s.append(time.perf_counter() - t0)
        return loss

    def _valid_epoch(self, valid_data, show_progress=False):
        t0 = time.perf_counter()
        score, result = super()._valid_epoch(valid_data, show_progress)
        self.valid_s.append(time.perf_counter() - t0)
        self.valid_ndcg.append(score)
        return score, result


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zip", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs-csv")
    a = ap.parse_args()
    # RecBole 1.2.1 under pandas 2 and torch 2 warns at every turn.
    warnings.filterwarnings("ignore")

    convert(a.zip, os.path.join(a.dir, DATASET))
    # RecBole writes log/ and log_tensorboard/ under the working directory.
    config_file = os.path.abspath(a.config)
    epochs_csv = os.path.abspath(a.epochs_csv) if a.epochs_csv else None
    a.dir = os.path.abspath(a.dir)
    os.chdir(a.dir)
    cfg = {"data_path": a.dir, "checkpoint_dir": os.path.join(a.dir, "saved"),
           "epochs": a.epochs, "device": "cpu", "use_gpu": False}
    config = Config(model="SASRec", dataset=DATASET, config_file_list=[config_file],
                    config_dict=cfg)
    init_seed(config["seed"], config["reproducibility"])
    init_logger(config)
    logging.getLogger().setLevel(logging.WARNING)
    torch.set_num_threads(a.threads)

    dataset = create_dataset(config)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    init_seed(config["seed"] + config["local_rank"], config["reproducibility"])
    model = SASRec(config, train_data._dataset).to(config["device"])
    trainer = TimedTrainer(config, model)
    trainer.fit(train_data, valid_data, saved=True, show_progress=False, verbose=False)
    # The best-validation model, as evaluate(load_best_model=True) would load
    # it, but from RecBole's own checkpoint with weights_only=False (torch
    # 2.6 and later refuse the pickled config it holds by default).
    ckpt = torch.load(trainer.saved_model_file, map_location="cpu", weights_only=False)
    model.load_state_dict(ckpt["state_dict"])
    model.load_other_parameter(ckpt.get("other_parameter"))
    test = trainer.evaluate(test_data, load_best_model=False, show_progress=False)

    # The best epoch as RecBole's early_stopping picks it (a score >= the
    # best so far replaces it), 1-based.
    best, best_e = -1.0, 0
    for e, s in enumerate(trainer.valid_ndcg):
        if s >= best:
            best, best_e = s, e + 1
    epoch_s = [t + v for t, v in zip(trainer.train_s, trainer.valid_s)]
    if epochs_csv:
        with open(epochs_csv, "a") as f:
            cum = 0.0
            for e, (t, s, v) in enumerate(zip(trainer.train_s, epoch_s, trainer.valid_ndcg)):
                cum += s
                f.write(f"recbole,-,{e + 1},{t:.2f},{s:.2f},{cum:.2f},{v:.6f}\n")
    print(f"recbole,recbole_epochs_run,{len(epoch_s)}")
    print(f"recbole,recbole_train_epoch_seconds,{median(trainer.train_s):.2f}")
    print(f"recbole,recbole_epoch_seconds,{median(epoch_s):.2f}")
    print(f"recbole,recbole_best_epoch,{best_e}")
    print(f"recbole,recbole_seconds_to_best,{sum(epoch_s[:best_e]):.2f}")
    print(f"recbole,recbole_valid_ndcg10,{best:.6f}")
    print(f"recbole,recbole_test_ndcg10,{test['ndcg@10']:.6f}")
    print(f"recbole,recbole_test_hr10,{test['hit@10']:.6f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
