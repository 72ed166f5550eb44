"""Where a node is and who it is there: the chain its store is bound to, and what its key is registered as.

* `store_binding`: the (chain id, genesis block hash, contract addresses) a node's or the CLI's store is bound to
  (node/store.py `StoreBinding`), read from the chain the deployment file names.
* `registration_problem`: why an account cannot serve a role with the models it loaded, read from the registry's
  views (StakingRegistry `accountOf`, `serves`, `modelsOf`, `vocabSizeOf`), or None. `verispec serve` refuses to
  start on one. Unbonding, or a stake slashed below the minimum, is no reason: such a node is given no new jobs,
  but must still finish its running jobs and answer its disputes, or lose stake.
"""

from __future__ import annotations

from collections.abc import Mapping

from web3 import Web3

from node.chain.enums import Role
from node.store import StoreBinding


def store_binding(w3: Web3, deployment) -> StoreBinding:
    """The binding of a store used with `deployment` on the chain `w3` serves."""
    genesis = w3.eth.get_block(0)["hash"]
    return StoreBinding.of(w3.eth.chain_id, Web3.to_hex(genesis), deployment.addresses)


def _short(model_id: bytes) -> str:
    return "0x" + bytes(model_id).hex()[:16]


def registration_problem(
    registry, address: str, role: str, models: Mapping[str, tuple[bytes, int | None]]
) -> str | None:
    """One line saying why `address` cannot serve `role` (drafter, verifier, referee) with `models` (name -> (model
    id, vocabulary size) for "draft" and "target", as loaded), or None when its registration fits them."""
    fn = registry.functions
    account = fn.accountOf(address).call()
    registered = Role(int(account[1]))
    if registered is Role.None_:
        return f"{address} is not registered: `verispec register --role {role} ...` with these models first"
    if registered.label != role:
        return f"{address} is registered as a {registered.label}, not a {role}: serve it as one, or use another key"
    draft, target = models["draft"][0], models["target"][0]
    if role == "drafter":
        needed = [("draft", draft)]
        if bytes(account[5]) != bytes(target) or not fn.serves(address, draft).call():
            served = [_short(m) for m in fn.modelsOf(address).call()]
            return (
                f"{address} is registered as a drafter of draft {', '.join(served) or 'none'} for target "
                f"{_short(account[5])}, but this node loaded draft {_short(draft)} and target {_short(target)}"
            )
    elif role == "verifier":
        needed = [("target", target)]
        if not fn.serves(address, target).call():
            served = [_short(m) for m in fn.modelsOf(address).call()]
            return (
                f"{address} is registered as a verifier of {', '.join(served)}, but this node loaded target "
                f"{_short(target)}: its jobs name a registered model"
            )
    else:
        served = [bytes(m) for m in fn.modelsOf(address).call()]
        needed = [(name, bytes(mid)) for name, mid in (("target", target), ("draft", draft)) if bytes(mid) in served]
        foreign = [_short(m) for m in served if m not in (bytes(target), bytes(draft))]
        if foreign or not needed:
            return (
                f"{address} is registered as a referee of {', '.join(_short(m) for m in served)}, but this node loaded "
                f"target {_short(target)} and draft {_short(draft)}: it would be drawn for disputes it cannot replay"
            )
    for name, mid in needed:
        vocab = models[name][1]
        on_chain = int(fn.vocabSizeOf(address, mid).call())
        if vocab is not None and on_chain != int(vocab):
            return (
                f"{address} registered {name} model {_short(mid)} with vocabulary {on_chain}, but the loaded "
                f"checkpoint's is {vocab}"
            )
    return None
