// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title CallBatch
/// @notice A smart-wallet stand-in for the node's tests: it makes several calls in one transaction, each allowed to
/// fail, so that a settlement sent through a contract (and a reverted call beside it) can be read back from chain
/// data as a watchdog must.
contract CallBatch {
    /// @notice Call `i` of the batch reverted (and was skipped, as allowed).
    event CallFailed(uint256 i);

    /// @notice Call `i` reverted, and the batch did not allow it to.
    error CallReverted(uint256 i);

    /// @notice Calls `targets[i]` with `data[i]` in order; a call whose `allowFailure[i]` is set may revert.
    /// @param targets The contracts to call.
    /// @param data The calldata of each call.
    /// @param allowFailure Whether each call may revert without reverting the batch.
    function run(address[] calldata targets, bytes[] calldata data, bool[] calldata allowFailure) external {
        for (uint256 i = 0; i < targets.length; ++i) {
            (bool ok,) = targets[i].call(data[i]);
            if (!ok) {
                if (!allowFailure[i]) revert CallReverted(i);
                emit CallFailed(i);
            }
        }
    }
}
