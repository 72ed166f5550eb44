// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {console2} from "forge-std/console2.sol";
import {IDisputeManager} from "../../contracts/interfaces/IDisputeManager.sol";
import {IInferenceMarket} from "../../contracts/interfaces/IInferenceMarket.sol";
import {DisputeManager} from "../../contracts/DisputeManager.sol";
import {InferenceMarket} from "../../contracts/InferenceMarket.sol";
import {StakingRegistry} from "../../contracts/StakingRegistry.sol";
import {TranscriptSettlement} from "../../contracts/TranscriptSettlement.sol";
import {AlphaHandler} from "./AlphaHandler.sol";
import {AlphaModel} from "./AlphaModel.sol";
import {CampaignBase, FuzzSelector} from "./Base.sol";
import {DisputeHandler} from "./DisputeHandler.sol";
import {JobHandler} from "./JobHandler.sol";
import {Ledger} from "./Ledger.sol";
import {RegistryHandler} from "./RegistryHandler.sol";

/// @title ProtocolInvariants
/// @notice forge's invariant campaign over the whole protocol (registry, market, α window, disputes; the
/// transcript settlement deployed and wired), the money invariants of tests/test_stateful.py checked after every
/// call: each contract holds exactly what it owes, the ETH of the actors and the contracts is conserved and every
/// wallet equals its ghost ledger, the market's credits equal the handlers' predictions (nobody paid twice, nobody
/// paid wrong), locks equal open jobs and disputes (no locked stake leaves), and the α windows equal their model.
/// Deployment as node/chain/deploy.py with tests/test_stateful.py's parameters (α bucket 1, one referee seat, one
/// appeal, one escalation, 120 s appeal and escalation periods), so windows fill and appeals happen within a run.
contract ProtocolInvariants is CampaignBase {
    StakingRegistry internal registry;
    InferenceMarket internal market;
    DisputeManager internal disputes;
    TranscriptSettlement internal transcript;
    Ledger internal ledger;
    AlphaModel internal alpha;
    RegistryHandler internal registryHandler;
    JobHandler internal jobHandler;
    AlphaHandler internal alphaHandler;
    DisputeHandler internal disputeHandler;

    function setUp() public {
        ledger = new Ledger(vmx.envOr("VERISPEC_FORGE_MUTANT", uint256(0)));
        vm.warp(ledger.time());
        vm.roll(ledger.blockNo());
        // node/chain/params.py DEFAULT_PARAMS, with test_stateful.py's overrides
        registry = new StakingRegistry(1 ether, 1 ether, 0.5 ether, 3 days);
        market = new InferenceMarket(
            address(registry),
            10 minutes,
            2 minutes,
            2 minutes,
            1 days,
            0.1 ether,
            1,
            WAD / 10,
            1_000,
            3e12,
            1_000,
            BURN
        );
        disputes = new DisputeManager(
            address(registry),
            address(market),
            IDisputeManager.Config({
                bond: 0.1 ether,
                answerPeriod: 1 hours,
                commitPeriod: 1 hours,
                revealPeriod: 1 hours,
                refereeCount: 1,
                accusedSlash: 0.6 ether,
                refereePenalty: 0.01 ether,
                appealPeriod: 120,
                escalationPeriod: 120,
                maxAppeals: 1,
                maxEscalations: 1
            })
        );
        registry.setProtocolContracts(address(market), address(disputes));
        market.setDisputeManager(address(disputes));
        transcript = new TranscriptSettlement(address(market), 0.5 ether, 5_000);
        market.setTranscriptSettlement(address(transcript));

        alpha = new AlphaModel(market, registry);
        registryHandler = new RegistryHandler(registry, market, disputes, ledger, alpha);
        alphaHandler = new AlphaHandler(registry, market, disputes, ledger, alpha);
        jobHandler = new JobHandler(registry, market, disputes, ledger, alpha, address(alphaHandler));
        alphaHandler.setJobs(jobHandler);
        disputeHandler = new DisputeHandler(registry, market, disputes, ledger, jobHandler);
        jobHandler.setDisputeHandler(address(disputeHandler));

        for (uint256 i = 0; i < ACTORS; ++i) {
            vm.deal(actor(i), INITIAL_ETH);
        }
        for (uint256 i = 0; i < DRAFTERS; ++i) {
            alpha.setAlphaStar(drafterAt(i), uint64(6 * WAD / 10));
        }
        for (uint256 i = REQUESTERS; i < ACTORS; ++i) {
            registryHandler.registerAs(actor(i), 2 ether);
        }
    }

    // ------------------------------------------------------------------ what forge calls

    function targetContracts() public view returns (address[] memory t) {
        t = new address[](4);
        (t[0], t[1], t[2], t[3]) =
        (address(registryHandler), address(jobHandler), address(alphaHandler), address(disputeHandler));
    }

    function targetSelectors() public view returns (FuzzSelector[] memory s) {
        s = new FuzzSelector[](4);
        s[0] = FuzzSelector(address(registryHandler), new bytes4[](4));
        s[0].selectors[0] = RegistryHandler.register.selector;
        s[0].selectors[1] = RegistryHandler.addStake.selector;
        s[0].selectors[2] = RegistryHandler.requestUnbond.selector;
        s[0].selectors[3] = RegistryHandler.withdrawUnbonded.selector;
        s[1] = FuzzSelector(address(jobHandler), new bytes4[](7));
        s[1].selectors[0] = JobHandler.submit.selector;
        s[1].selectors[1] = JobHandler.accept.selector;
        s[1].selectors[2] = JobHandler.commit.selector;
        s[1].selectors[3] = JobHandler.verify.selector;
        s[1].selectors[4] = JobHandler.timeout.selector;
        s[1].selectors[5] = JobHandler.finalize.selector;
        s[1].selectors[6] = JobHandler.withdraw.selector;
        s[2] = FuzzSelector(address(alphaHandler), new bytes4[](3));
        s[2].selectors[0] = AlphaHandler.honestJob.selector;
        s[2].selectors[1] = AlphaHandler.raiseAlpha.selector;
        s[2].selectors[2] = AlphaHandler.lowerAlpha.selector;
        s[3] = FuzzSelector(address(disputeHandler), new bytes4[](9));
        s[3].selectors[0] = DisputeHandler.open.selector;
        s[3].selectors[1] = DisputeHandler.draw.selector;
        s[3].selectors[2] = DisputeHandler.answer.selector;
        s[3].selectors[3] = DisputeHandler.answerTimeout.selector;
        s[3].selectors[4] = DisputeHandler.commitVote.selector;
        s[3].selectors[5] = DisputeHandler.revealVote.selector;
        s[3].selectors[6] = DisputeHandler.resolve.selector;
        s[3].selectors[7] = DisputeHandler.appeal.selector;
        s[3].selectors[8] = DisputeHandler.withdraw.selector;
    }

    // ------------------------------------------------------------------ the invariant

    /// @notice Every money invariant, after every call of the campaign. forge runs one campaign per `invariant_`
    /// function, so they are checked together by this one: one campaign of runs × depth calls checks them all
    /// (each `check_` below names what broke in its revert message).
    function invariant_money() public view {
        check_registryHoldsTheStakes();
        check_marketHoldsEscrowsAndOwed();
        check_disputesHoldBondsAndCredits();
        check_ethConserved();
        check_walletsMatchTheLedger();
        check_nobodyPaidTwice();
        check_locksEqualOpenObligations();
        check_drafterLoadsAreTheirLiveJobs();
        check_alphaWindowsMatchTheModel();
    }

    // ------------------------------------------------------------------ each contract holds what it owes

    /// @notice The registry holds exactly the stakes; no stake exceeds what its registration deposited.
    function check_registryHoldsTheStakes() internal view {
        uint256 sum = 0;
        for (uint256 i = 0; i < ACTORS; ++i) {
            address a = actor(i);
            uint256 stake = registry.stakeOf(a);
            require(stake <= ledger.stakeDeposited(a), "a stake rose above what was deposited");
            sum += stake;
        }
        require(address(registry).balance == sum, "registry balance != sum of stakes");
    }

    /// @notice The market holds exactly the escrows of unfinalized jobs (what their requesters paid in) plus
    /// everything it owes.
    function check_marketHoldsEscrowsAndOwed() internal view {
        uint256 sum = market.owed(BURN);
        for (uint256 i = 0; i < ACTORS; ++i) {
            sum += market.owed(actor(i));
        }
        uint256 n = jobHandler.openCount();
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = jobHandler.openAt(k);
            if (market.jobStatus(id) != IInferenceMarket.JobStatus.Finalized) sum += jobHandler.metaOf(id).escrow;
        }
        require(address(market).balance == sum, "market balance != escrows + owed");
        require(address(transcript).balance == 0, "the transcript settlement holds ETH");
    }

    /// @notice The dispute manager holds exactly the bonds and appeal bonds of unresolved disputes plus its credits.
    function check_disputesHoldBondsAndCredits() internal view {
        uint256 sum = disputes.credits(BURN);
        for (uint256 i = 0; i < ACTORS; ++i) {
            sum += disputes.credits(actor(i));
        }
        uint256 n = disputeHandler.openCount();
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = disputeHandler.openAt(k);
            IDisputeManager.Dispute memory d = disputes.getDispute(id);
            if (d.status == IDisputeManager.Status.Resolved) continue;
            sum += disputes.bond();
            for (uint256 r = 1; r <= d.round; ++r) {
                sum += disputes.roundOf(id, r).appealBond;
            }
        }
        require(address(disputes).balance == sum, "dispute manager balance != bonds + credits");
    }

    // ------------------------------------------------------------------ conservation and the ghost ledger

    /// @notice No wei appears or vanishes: actors + contracts + the burn address hold what the actors started with,
    /// and the contracts hold what the ledger saw go in less what it saw come out.
    function check_ethConserved() internal view {
        uint256 held = address(registry).balance + address(market).balance + address(disputes).balance
            + address(transcript).balance;
        uint256 wallets = 0;
        for (uint256 i = 0; i < ACTORS; ++i) {
            wallets += actor(i).balance;
        }
        require(wallets + held + BURN.balance == ACTORS * INITIAL_ETH, "total ETH changed");
        require(held == ledger.totalSent() - ledger.totalReceived(), "contracts hold != ghost in - out");
        require(BURN.balance == 0, "the burn address was paid");
    }

    /// @notice Every wallet is its start less what it sent plus what it was measured to receive.
    function check_walletsMatchTheLedger() internal view {
        for (uint256 i = 0; i < ACTORS; ++i) {
            address a = actor(i);
            require(a.balance == INITIAL_ETH + ledger.received(a) - ledger.sent(a), "a wallet left its ledger");
        }
    }

    /// @notice Nobody is paid twice or wrong: what the market owes each account is what the handlers predicted it
    /// credited less what it withdrew; every withdrawal paid what was owed and a second one right after reverted.
    function check_nobodyPaidTwice() internal view {
        require(!ledger.paidTwice(), "a second withdrawal paid");
        require(!ledger.paidWrong(), "a withdrawal paid other than what was owed");
        require(!ledger.recordMismatch(), "the market stored another cycle record");
        require(market.owed(BURN) == ledger.marketCredited(BURN), "treasury credit != prediction");
        for (uint256 i = 0; i < ACTORS; ++i) {
            address a = actor(i);
            require(
                market.owed(a) == ledger.marketCredited(a) - ledger.marketWithdrawn(a),
                "market owed != predicted credits"
            );
        }
    }

    // ------------------------------------------------------------------ locks

    /// @notice Each account's locks are its open jobs (as drafter or verifier) plus its unresolved disputes (as the
    /// accused, or on a panel of any round); no locked stake was ever withdrawn.
    function check_locksEqualOpenObligations() internal view {
        require(!ledger.lockedStakeLeft(), "withdrawUnbonded paid a locked stake");
        uint256[ACTORS] memory expected;
        uint256 n = jobHandler.openCount();
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = jobHandler.openAt(k);
            if (market.jobStatus(id) == IInferenceMarket.JobStatus.Finalized) continue;
            JobHandler.Meta memory m = jobHandler.metaOf(id);
            expected[_index(m.drafter)] += 1;
            expected[_index(m.verifier)] += 1;
        }
        n = disputeHandler.openCount();
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = disputeHandler.openAt(k);
            IDisputeManager.Dispute memory d = disputes.getDispute(id);
            if (d.status == IDisputeManager.Status.Resolved) continue;
            expected[_index(d.accused)] += 1;
            for (uint256 r = 0; r <= d.round; ++r) {
                address[] memory panel = disputes.panelOf(id, r);
                for (uint256 i = 0; i < panel.length; ++i) {
                    expected[_index(panel[i])] += 1;
                }
            }
        }
        for (uint256 i = 0; i < ACTORS; ++i) {
            require(registry.accountOf(actor(i)).locks == expected[i], "locks != open jobs + disputes");
        }
    }

    /// @notice Each drafter's load (`drafterLoad`) counts exactly its Open or Running jobs, and never exceeds its
    /// capacity (v1.2; nobody lowers a capacity below its load in the campaign).
    function check_drafterLoadsAreTheirLiveJobs() internal view {
        uint256[ACTORS] memory expected;
        uint256 n = jobHandler.openCount();
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = jobHandler.openAt(k);
            IInferenceMarket.JobStatus s = market.jobStatus(id);
            if (s == IInferenceMarket.JobStatus.Open || s == IInferenceMarket.JobStatus.Running) {
                expected[_index(jobHandler.metaOf(id).drafter)] += 1;
            }
        }
        for (uint256 i = 0; i < DRAFTERS; ++i) {
            address d = drafterAt(i);
            (uint256 live, uint256 capacity) = market.drafterLoad(d);
            require(live == expected[_index(d)], "drafter load != its Open or Running jobs");
            require(live <= capacity, "a drafter holds more jobs than its capacity");
        }
    }

    // ------------------------------------------------------------------ α window

    /// @notice Every drafter's α window (claim, cycles, accepted, rejected, closed buckets) equals the model's, and
    /// α* was never lowered while the window held cycles.
    function check_alphaWindowsMatchTheModel() internal view {
        require(!ledger.alphaLoweredInWindow(), "alpha* lowered while the window held cycles");
        for (uint256 i = 0; i < DRAFTERS; ++i) {
            require(
                _window(address(market), drafterAt(i)) == _window(address(alpha), drafterAt(i)), "alpha window != model"
            );
        }
    }

    /// @dev alphaWindowOf's five words from `source` (the market or the model), hashed.
    function _window(address source, address drafter) internal view returns (bytes32) {
        (bool ok, bytes memory ret) =
            source.staticcall(abi.encodeWithSelector(AlphaModel.alphaWindowOf.selector, drafter));
        require(ok, "alphaWindowOf failed");
        return keccak256(ret);
    }

    // ------------------------------------------------------------------ the run's summary

    /// @notice Prints what the run did (forge runs it once after each run's calls; shown with -vv and in --json).
    function afterInvariant() public view {
        bytes32[] memory names = ledger.names();
        for (uint256 i = 0; i < names.length; ++i) {
            console2.log(string(abi.encodePacked("campaign ", _trim(names[i]))), ledger.count(names[i]));
        }
        console2.log("campaign alpha:evaluations", alpha.evaluations());
        console2.log("campaign alpha:breaches", alpha.breaches());
        console2.log("campaign jobs", market.jobCount());
        console2.log("campaign disputes", disputes.disputeCount());
    }

    function _index(address a) internal pure returns (uint256) {
        return uint160(a) - uint160(actor(0));
    }

    function _trim(bytes32 name) internal pure returns (bytes memory out) {
        uint256 n = 0;
        while (n < 32 && name[n] != 0) ++n;
        out = new bytes(n);
        for (uint256 i = 0; i < n; ++i) {
            out[i] = name[i];
        }
    }
}
