"""StakingRegistry's verifier endpoint (the transcript-mode link's URL, docs/protocol.md "Transcript mode (v2)")."""

from __future__ import annotations

from chainutil import (  # noqa: F401  (env is a fixture)
    ROLE_REFEREE,
    TARGET_MODEL,
    VOCAB,
    advance,
    env,
    events,
    expect_revert,
    transact,
)


def test_a_verifier_sets_and_clears_its_endpoint(chain, env):
    reg, who = env.registry.functions, env.actors.verifier
    assert reg.endpointOf(who).call() == ""
    url = "ws://127.0.0.1:8765/verispec"
    receipt = transact(env.w3, reg.setEndpoint(url), who)
    (ev,) = events(env.registry, receipt, "EndpointSet")
    assert (ev.args.account, ev.args.endpoint) == (who, url)
    assert reg.endpointOf(who).call() == url
    longest = "w" * reg.MAX_ENDPOINT().call()
    transact(env.w3, reg.setEndpoint(longest), who)
    assert reg.endpointOf(who).call() == longest
    transact(env.w3, reg.setEndpoint(""), who)
    assert reg.endpointOf(who).call() == ""


def test_set_endpoint_reverts(chain, env):
    reg, a = env.registry.functions, env.actors
    maximum = reg.MAX_ENDPOINT().call()
    transact(env.w3, reg.setEndpoint("ws://kept"), a.verifier)
    state = lambda: tuple(reg.endpointOf(w).call() for w in (a.verifier, a.drafter, a.outsider))  # noqa: E731
    expect_revert(
        env, reg.setEndpoint("w" * (maximum + 1)), a.verifier, "EndpointTooLong", (maximum + 1, maximum), state=state
    )
    for who in (a.drafter, a.referees[0], a.outsider):
        expect_revert(env, reg.setEndpoint("ws://x"), who, "NotVerifier", (who,), state=state)
    assert reg.endpointOf(a.verifier).call() == "ws://kept"


def test_withdrawing_the_stake_deletes_the_endpoint(chain, env):
    w3, reg, who = env.w3, env.registry.functions, env.actors.verifier
    transact(w3, reg.setEndpoint("ws://gone"), who)
    transact(w3, reg.requestUnbond(), who)
    assert reg.endpointOf(who).call() == "ws://gone"  # kept while unbonding: open jobs may still need the link
    advance(w3, env.params.unbonding_period + 1)
    transact(w3, reg.withdrawUnbonded(), who)
    assert reg.endpointOf(who).call() == ""
    # re-registered as a referee, it cannot publish one
    transact(w3, reg.register(ROLE_REFEREE, [TARGET_MODEL], [VOCAB]), who, env.params.min_referee_stake)
    expect_revert(env, reg.setEndpoint("ws://x"), who, "NotVerifier", (who,))
