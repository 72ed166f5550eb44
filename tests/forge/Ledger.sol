// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {CampaignBase} from "./Base.sol";

/// @title Ledger
/// @notice The campaign's ghost state shared by every handler: the clock (each action moves time and the block
/// number forward, so the windows open and close), every wei an actor sent to or received from a protocol contract,
/// the market credits the handlers predict, the flags of checks made inside a handler (a second withdrawal that
/// paid, a locked stake that left), and counters of what the run did.
contract Ledger is CampaignBase {
    uint256 public time = 1_700_000_000;
    uint256 public blockNo = 100;

    mapping(address => uint256) public sent; // by actor, to any protocol contract
    mapping(address => uint256) public received; // by actor, from any protocol contract
    uint256 public totalSent;
    uint256 public totalReceived;

    // market: what the handlers predicted it credits each account (owed), and what each account withdrew from it
    mapping(address => uint256) public marketCredited;
    mapping(address => uint256) public marketWithdrawn;
    // registry: what the current registration of each account deposited (a stake only falls below it by a slash)
    mapping(address => uint256) public stakeDeposited;

    bool public paidTwice; // a withdrawal right after a successful one paid again
    bool public paidWrong; // a withdrawal paid other than what the contract said it owed
    bool public lockedStakeLeft; // withdrawUnbonded paid while the stake was locked
    bool public recordMismatch; // the market stored another cycle record than the one the handler computed
    bool public alphaLoweredInWindow; // setAlphaStar lowered α* while the window held cycles

    mapping(bytes32 => uint256) public count; // what the run did, by name (afterInvariant prints them)
    bytes32[] public countNames;

    /// @dev The break switch of the campaign's own failure test (tests/test_forge_invariants.py): 1 = the market's
    /// withdraw handler skips its ghost update, so the wallet and conservation invariants must fail.
    uint256 public immutable mutant;

    constructor(uint256 mutant_) {
        mutant = mutant_;
    }

    /// @dev Sets the chain's clock to the ledger's, after moving it `dt` seconds and one block forward.
    function tick(uint256 dt) external {
        time += dt;
        blockNo += 1;
        vm.warp(time);
        vm.roll(blockNo);
    }

    /// @dev Jumps the clock to `t` (if later) and one block on.
    function warpTo(uint256 t) external {
        if (t > time) time = t;
        blockNo += 1;
        vm.warp(time);
        vm.roll(blockNo);
    }

    function paid(address who, uint256 amount) external {
        sent[who] += amount;
        totalSent += amount;
    }

    function got(address who, uint256 amount) external {
        received[who] += amount;
        totalReceived += amount;
    }

    function marketCredit(address who, uint256 amount) external {
        marketCredited[who] += amount;
    }

    function marketWithdraw(address who, uint256 amount) external {
        marketWithdrawn[who] += amount;
    }

    function deposit(address who, uint256 amount) external {
        stakeDeposited[who] += amount;
    }

    function resetDeposit(address who) external {
        stakeDeposited[who] = 0;
    }

    function flagPaidTwice() external {
        paidTwice = true;
    }

    function flagPaidWrong() external {
        paidWrong = true;
    }

    function flagLockedStakeLeft() external {
        lockedStakeLeft = true;
    }

    function flagRecordMismatch() external {
        recordMismatch = true;
    }

    function flagAlphaLowered() external {
        alphaLoweredInWindow = true;
    }

    function bump(bytes32 name) external {
        if (count[name] == 0) countNames.push(name);
        count[name] += 1;
    }

    function names() external view returns (bytes32[] memory) {
        return countNames;
    }
}
