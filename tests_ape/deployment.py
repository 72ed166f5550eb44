"""Deployment parameters of the ape suite: node/chain/deploy.py's defaults (DeploymentParams), copied so that
this suite needs nothing from the node's venv."""

ETHER = 10**18
WAD = 10**18
MINUTE, HOUR, DAY = 60, 3600, 86400
ZERO_ADDRESS = "0x" + "00" * 20

# StakingRegistry(minDrafterStake, minVerifierStake, minRefereeStake, unbondingPeriod)
REGISTRY_ARGS = dict(
    min_drafter_stake=1 * ETHER, min_verifier_stake=1 * ETHER, min_referee_stake=ETHER // 2, unbonding_period=3 * DAY
)
# InferenceMarket(registry, acceptTimeout, commitTimeout, verifyTimeout, challengeWindow, timeoutSlash,
#                 alphaBucketCycles, alphaTolerance, alphaSlashBps)
MARKET_ARGS = dict(
    accept_timeout=10 * MINUTE,
    commit_timeout=2 * MINUTE,
    verify_timeout=2 * MINUTE,
    challenge_window=1 * DAY,
    timeout_slash=ETHER // 10,
    alpha_bucket_cycles=64,
    alpha_tolerance=WAD // 10,
    alpha_slash_bps=1_000,
)
