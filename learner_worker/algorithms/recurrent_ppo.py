"""recurrent_ppo: the clipped surrogate objective on a policy with a recurrent core, over whole env sequences.

Each chunk's env columns are unrolled from the core state the collector stored for their first row, with the
state zeroed at every episode start inside the column (learner_worker/recurrent.py). Before any gradient step the
current critic gives every row's value and, from the state after the row, its next observation's value; GAE runs
per env column as for memoryless policies (learner_worker/gae.py). Each epoch shuffles the sequences with the
learner's own generator and splits them into minibatches of minibatch_size // L whole sequences (at least one);
every minibatch is unrolled again with gradient through its L steps (truncated backprop through time), so the core
learns what to remember within a sequence and carries the rest in the states it starts from. A sequence is an env
column of a chunk (L = T), or with `bptt_steps` a window of one, started from the state the current weights reached
there before the update.

The behaviour log-probabilities come from the collector, as for every importance-ratio learner: with policy lag the
behaviour policy (and the memory it acted from) is one the learner no longer holds. Invalid rows (the env raised,
or a core state turned non-finite) are unrolled through but never reach a loss.

In a learner group each rank unrolls the sequences of the chunks it took, in counts that differ. Every rank takes
as many minibatches per epoch as one learner would on all ranks' rows (each step's all-reduce waits for every
rank), its own sequences split evenly among them (a rank may bring none to a minibatch), and a minibatch is the
union of every rank's part: its loss is the mean over the union's valid rows (learner_worker/surrogate.py), so the
averaged gradient is the one a single learner would take on those sequences.
"""

from __future__ import annotations

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import CPU, explained_variance
from rlfleet.learner_worker.optimizers import BackgroundOptimizer
from rlfleet.learner_worker.recurrent import RecurrentActorCritic, Sequences
from rlfleet.learner_worker.surrogate import clipped_surrogate
from rlfleet.shared.algorithms.recurrent_ppo import RecurrentPPOParams
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour

TERMS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm")


class RecurrentPPO(RecurrentActorCritic):
    def __init__(self, spaces: Spaces, cfg: RecurrentPPOParams, behaviour: Behaviour, seed: int,
                 device: torch.device = CPU) -> None:
        super().__init__(spaces, cfg.net, behaviour, seed, cfg.log_std_init, cfg.value, device)
        self.cfg = cfg
        self.optimizer = BackgroundOptimizer(torch.optim.Adam, self.params, lr=cfg.learning_rate, eps=1e-5)

    def minibatches(self, seqs: Sequences) -> list[torch.Tensor]:
        """Shuffled sequence indices, minibatch_size // T whole sequences each (at least one); in a learner group,
        this rank's sequences split evenly among as many minibatches as the group's rows make (module doc)."""
        perm = torch.randperm(seqs.count, generator=self.generator).to(self.device)
        if self.group is not None:
            rows = int(self.group.sum(torch.tensor([seqs.count * seqs.length])).item())
            return list(perm.tensor_split(max(1, -(-rows // self.cfg.minibatch_size))))
        per = max(1, self.cfg.minibatch_size // seqs.length)
        return [piece for piece in perm.split(per)]

    def minibatch_loss(self, seqs: Sequences, idx: torch.Tensor
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        """The loss of sequences `idx` and its terms (detached); None when none of their rows is valid (in a learner
        group: none of every rank's part, so that all ranks skip the step together)."""
        cfg = self.cfg
        logp, entropy_rows, critic_out, mask = self.evaluate_sequences(seqs, idx)
        valid = mask.sum() if self.group is None else self.group.sum(mask.sum().reshape(1))
        if not bool(valid.item()):
            return None

        def rows(x: torch.Tensor) -> torch.Tensor:
            return x[:, idx].reshape(-1)[mask]

        policy_loss, average, terms = clipped_surrogate(logp, rows(seqs.logp), rows(seqs.advantages),
                                                        cfg.clip_range, cfg.normalize_advantages, self.group)
        value_loss = average(self.codec.loss(critic_out, rows(seqs.targets)))
        entropy = average(entropy_rows)
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        return loss, {"policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(),
                      "entropy": entropy.detach(), **terms}

    def update(self, chunks: list[dict[str, np.ndarray]]) -> dict[str, float]:
        cfg = self.cfg
        seqs = self.sequences(chunks, cfg.gamma, cfg.gae_lambda, cfg.bptt_steps)
        valid = seqs.mask.reshape(-1)
        explained = explained_variance(seqs.targets.reshape(-1)[valid], seqs.values.reshape(-1)[valid])
        sums = dict.fromkeys(TERMS, 0.0)
        count = 0
        for _ in range(cfg.epochs):
            for idx in self.minibatches(seqs):
                result = self.minibatch_loss(seqs, idx)
                if result is None:
                    continue
                loss, terms = result
                self.optimizer.zero_grad()
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.optimizer.step()
                for name, value in terms.items():
                    sums[name] += value.item()
                sums["grad_norm"] += grad_norm.item()
                count += 1
        self.updates += 1
        info = {k: v / max(count, 1) for k, v in sums.items()}
        info["explained_variance"] = explained
        return info
