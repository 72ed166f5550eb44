// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IInferenceMarket} from "./IInferenceMarket.sol";
import {TranscriptTypes} from "../lib/TranscriptTypes.sol";

/// @title ITranscriptSettlement
/// @notice The transcript settlement's types, events, errors and external functions: one-transaction settlement of
/// a transcript both parties signed, rule challenges, pulls for the referee flow, and force moves against a silent
/// party (docs/protocol.md "Transcript mode (v2)"). The messages it checks are `TranscriptTypes`', signed under its
/// EIP-712 domain (`TranscriptSigner`, whose `TranscriptWrongSigner` error it also reverts with).
interface ITranscriptSettlement {
    // ------------------------------------------------------------------ types

    /// @notice What settlement posts beside the cycles: the Settlement, both signatures, the salt, the last reveal.
    struct Signed {
        TranscriptTypes.Settlement settlement;
        bytes drafterSig;
        bytes verifierSig;
        uint64 salt; // the drafter's salt (its Draft of cycle 0)
        bytes32 lastReveal; // the verifier's reveal of the last cycle: H^cycles(lastReveal) is its chain head
    }

    /// @notice A force move's evidence: the latest co-signed state S(k-1), shown by the drafter's Draft of cycle k
    /// (its prevState) and, for k ≥ 1, the verifier's Verification of cycle k-1 (its state); when the verifier
    /// forces, also its own Verification of cycle k (`pending`), the move it is owed an answer to.
    struct Evidence {
        TranscriptTypes.Draft draft;
        bytes draftSig;
        TranscriptTypes.Verification last;
        bytes lastSig;
        TranscriptTypes.Verification pending;
        bytes pendingSig;
    }

    /// @notice The silent party's on-chain answer: the verifier's verification of the pending draft (checked by
    /// the v1 rule), or the drafter's signed Draft of the next cycle.
    struct Answer {
        uint32[] tokens;
        uint64[] q;
        uint64[] p;
        bytes32 reveal;
        uint32 accepted;
        uint32 outToken;
        TranscriptTypes.Draft draft;
        bytes draftSig;
    }

    /// @notice What `settled` reports of a settled (or force-settled) job: the cycles root challenges prove against
    /// (stored), its cycle count (the market's) and whether a rule challenge convicted it.
    struct Settled {
        bytes32 cyclesRoot; // zero: no cycle was settled
        uint32 cycles;
        bool convicted; // a rule challenge succeeded (once per job)
    }

    /// @notice A pending force move, as `forceOf` returns it.
    struct Force {
        bytes32 state; // the state the answer must extend: S(k-1) (verifier silent) or S(k) (drafter silent)
        bytes32 pendingRoot; // verifier silent: the draft root of the Draft it must verify
        bytes32 cyclesRoot; // of the cycles the job settles at if nobody answers
        uint64 salt;
        uint64 deadline;
        uint16 cycles;
        uint16 emitted;
        uint16 rejected;
        bool outCut;
        address silent; // the party that must answer (zero: no force pending)
        bool slash; // false only for a drafter forced before it signed any Draft
    }

    // ------------------------------------------------------------------ events

    /// @notice `jobId` settled by both parties' Settlement: `cycles` cycles, `tokensOut` tokens, `cyclesRoot`; the
    /// verifier's last reveal `lastReveal` (earlier reveals follow by hashing it).
    event TranscriptSettled(
        uint256 indexed jobId, uint32 cycles, uint32 tokensOut, bytes32 cyclesRoot, bytes32 lastReveal
    );
    /// @notice `forcer` posted the co-signed state after `cycles` cycles of `jobId`; `silent` must answer by
    /// `deadline`. `reveal` is the verifier's latest reveal in the evidence (zero when none).
    event ForceMoved(
        uint256 indexed jobId, address indexed forcer, address indexed silent, uint256 cycles, uint256 deadline,
        bytes32 reveal
    );
    /// @notice The calldata of a force move of `jobId` that opened a force (its `forceMove` call as this contract
    /// read it, whoever sent it: an account, a contract wallet, an EIP-7702 account): the Draft or Verification the
    /// silent party must answer, which nodes read from this log (decoded as Solidity decodes it) and never from a
    /// transaction's input.
    event ForceEvidence(uint256 indexed jobId, bytes call);
    /// @notice The verifier answered a force move of `jobId` with its verification of cycle `cycle`.
    event ForceAnsweredVerification(
        uint256 indexed jobId, uint32 cycle, uint64[] p, bytes32 reveal, uint32 accepted, uint32 outToken
    );
    /// @notice The drafter answered a force move of `jobId` with its signed Draft of cycle `cycle`.
    event ForceAnsweredDraft(
        uint256 indexed jobId, uint32 cycle, bytes32 prevState, uint32[] tokens, uint64[] q, uint64 salt,
        bytes signature
    );
    /// @notice Nobody answered the force move of `jobId`: it settled at `cycles` cycles, `silent` slashed.
    event ForceSettled(uint256 indexed jobId, address indexed silent, uint256 cycles);
    /// @notice A force move's pending verification (or the answer) ended `jobId` at `cycles` cycles.
    event ForceCompleted(uint256 indexed jobId, uint256 cycles);
    /// @notice The chain attested state `state` after `cycles` cycles of `jobId` (`ended`: the job is over there).
    event StateAttested(uint256 indexed jobId, uint256 cycles, bytes32 state, bool ended);
    /// @notice Nobody settled or forced running job `jobId` by its idle deadline: it ended with no cycle paid.
    event JobIdled(uint256 indexed jobId);
    /// @notice Cycle `cycle` of `jobId` was pulled: its record hash is in the market for the dispute manager.
    event CyclePulled(uint256 indexed jobId, uint32 cycle, bytes32 recordHash);
    /// @notice `challenger` proved that cycle `cycle` of `jobId` breaks the v1 accept rule.
    event RuleChallengeWon(uint256 indexed jobId, uint32 cycle, address indexed challenger);

    // ------------------------------------------------------------------ errors

    /// @dev A constructor parameter is out of range.
    error TranscriptBadParams();
    /// @dev The job is not a running (or finished, for challenges) transcript job of the market.
    error NotTranscriptJob(uint256 jobId);
    /// @dev A message names another job.
    error WrongJob(uint256 expected, uint256 got);
    /// @dev A message or the posting names another cycle count.
    error WrongCycles(uint256 expected, uint256 got);
    /// @dev Cycle `cycle` has arrays of other than γ entries, or accepted above γ.
    error BadCycle(uint256 cycle);
    /// @dev Cycle `cycle` was posted after the job had already ended (EOS or maxTokens).
    error CycleAfterEnd(uint256 cycle);
    /// @dev The posted records do not end the job (a Settlement is the job's end; otherwise force-move).
    error TranscriptNotEnded();
    /// @dev No attested state after `cycles` cycles (or it does not end the job): the evidence needs a signature.
    error NotAttested(uint256 jobId, uint256 cycles);
    /// @dev The running job's idle deadline has not passed, or a force move is pending on it.
    error NotIdle(uint256 jobId, uint256 deadline);
    /// @dev The posted records fold to `computed`, not the state that was signed.
    error StateMismatch(bytes32 signed, bytes32 computed);
    /// @dev The tokens derived from the records differ from the Settlement's tokensOut.
    error TokensOutMismatch(uint256 signed, uint256 derived);
    /// @dev A reveal that does not hash to the verifier's chain head in the right number of steps.
    error RevealMismatch(uint256 cycle);
    /// @dev A Draft's draftRoot is not the root of its tokens and q.
    error DraftRootMismatch(uint256 cycle);
    /// @dev The caller is neither the job's drafter nor its verifier, or not the party this needs.
    error NotParty(address caller);
    /// @dev A drafter holding the verification of its Draft of cycle `cycle` (which did not end the job) drafts next.
    error NothingToForce(uint256 cycle);
    /// @dev The caller's force at `cycles` cycles was answered: a new one must reach further.
    error ForceAlreadyAnswered(uint256 jobId, uint256 cycles);
    /// @dev A force move is already pending at the same or a later state.
    error ForcePending(uint256 jobId, address silent);
    /// @dev No force move is pending on the job.
    error NoForce(uint256 jobId);
    /// @dev The force move's answer deadline has passed (answer) or not yet (claim).
    error ForceDeadline(uint256 deadline);
    /// @dev A verification posted on chain breaks the v1 accept rule.
    error RuleViolated(uint256 cycle);
    /// @dev The job has no settled records, or already lost a rule challenge.
    error NotChallengeable(uint256 jobId);
    /// @dev The proof does not show the cycle's bytes under the stored cycles root.
    error InvalidCycleProof(uint256 cycle);
    /// @dev The pulled record follows the v1 rule: the challenge fails.
    error RecordFollowsRule(uint256 jobId, uint256 cycle);

    // ------------------------------------------------------------------ settlement

    /// @notice Settles running transcript job `a.settlement.jobId` in one transaction (either party, or anyone holding
    /// the signatures): both parties' signatures of the Settlement, the drafter's salt, the verifier's last reveal
    /// and every cycle in calldata. The cycles must fold from the genesis of the salt to the signed state, number
    /// `cycles`, end the job (EOS or maxTokens at the last cycle, never before) and emit `tokensOut` tokens. The job
    /// becomes Finished with v1's counts, so `finalize` after the challenge window pays as v1.
    /// @dev The accept rule is not re-run here (rule challenges do). Supersedes a pending force move.
    /// @param a The Settlement, its two signatures, the salt and the last reveal.
    /// @param cycles The cycles 0..n-1, packed (PackedCycles: the γ byte, then 5 + 19γ bytes a cycle).
    function settle(Signed calldata a, bytes calldata cycles) external;

    // ------------------------------------------------------------------ challenges and pulls

    /// @notice A rule challenge (anyone, before finalize): cycle `cycle` of settled job `jobId`, its data `c` with
    /// a Merkle proof against the stored cycles root, and the verifier's reveal of that cycle. The contract re-runs
    /// the v1 accept rule (draft root from tokens and q, probability ranges, the accept count with the job's salt,
    /// capped at the first out-of-range proposal, outToken below the vocabulary); when the record disagrees, both
    /// signers forfeit their pay and are slashed `ruleSlash` each, the requester's escrow comes back whole at
    /// finalize, and the caller is owed `ruleRewardBps` of the smaller slash (the rest goes to the treasury).
    /// @dev Reverts {RecordFollowsRule} on a good record. One successful challenge per job.
    /// @param jobId The job.
    /// @param cycle The cycle.
    /// @param c The cycle's data, as settlement posted it: a packed run of this one cycle.
    /// @param reveal The verifier's reveal of `cycle` (H^(cycle+1)(reveal) is its chain head).
    /// @param proof The cycle's proof (`protocol.cycle_proof`).
    function challengeRule(uint256 jobId, uint32 cycle, bytes calldata c, bytes32 reveal, bytes32[] calldata proof)
        external;

    /// @notice Pulls cycle `cycle` of settled job `jobId` (anyone, before finalize): proves its packed bytes against
    /// the stored cycles root, rebuilds its v1 record (the draft root from its tokens and q, then the record hash) and
    /// stores that hash in the market, where the dispute manager reads it, so a DraftReplay / TargetReplay dispute on
    /// it runs through the v1 referee flow unchanged.
    /// @param jobId The job.
    /// @param cycle The cycle.
    /// @param c The cycle's data, as settlement posted it: a packed run of this one cycle.
    /// @param proof The cycle's proof (`protocol.cycle_proof`).
    function pullCycle(uint256 jobId, uint32 cycle, bytes calldata c, bytes32[] calldata proof) external;

    // ------------------------------------------------------------------ force moves

    /// @notice A party of running transcript job `jobId` whose counterparty went silent posts the latest state both
    /// signed, S(k-1) (k = `cycles.length`): the drafter's Draft of cycle k (prevState S(k-1)) and, for k ≥ 1, the
    /// verifier's Verification of cycle k-1 (state S(k-1)), with the k cycles folding to it. A drafter forcing
    /// waits for the verifier's verification of that Draft (verifyTimeout); a verifier forcing also posts its own
    /// Verification of cycle k, checked here by the v1 rule, and waits for the drafter's next Draft (commitTimeout);
    /// if that verification ends the job, the job settles at once. A verifier whose drafter never sent a Draft
    /// forces with an empty `e.draftSig` and no cycles: the drafter is then not slashed (v1: the first commit is
    /// its consent). Without an answer, `claimForce` settles at the co-signed state and slashes the silent party.
    /// @param jobId The job.
    /// @param e The evidence.
    /// @param cycles The cycles 0..k-1, packed as at settlement (their data: the job's data availability).
    function forceMove(uint256 jobId, Evidence calldata e, bytes calldata cycles) external;

    /// @notice The silent party answers a pending force move of `jobId` before its deadline, which cancels it (the
    /// job goes on off chain). The verifier answers with its verification of the pending Draft (`a.tokens`, `a.q`
    /// hashing to its root, `a.p`, `a.reveal`, `a.accepted`, `a.outToken`), which must follow the v1 rule (if it ends
    /// the job, the parties sign the Settlement, or the drafter force-moves with it, which completes the job). The
    /// drafter answers with its signed Draft of the next cycle (`a.draft`, `a.draftSig`) on the posted state. A
    /// settlement also answers (it supersedes the force).
    /// @param jobId The job.
    /// @param a The answer.
    function answerForce(uint256 jobId, Answer calldata a) external;

    /// @notice Settles a force move of `jobId` nobody answered by its deadline (anyone): the job ends at the posted
    /// co-signed state (and, when the drafter was silent, the verifier's checked verification after it), the silent
    /// party is slashed as for a v1 timeout, and the rest of the escrow goes back to the requester at finalize.
    /// @param jobId The job.
    function claimForce(uint256 jobId) external;

    /// @notice Completes running job `jobId` whose attested state ends it (the verifier's on-chain answer to a force
    /// was its last cycle), anyone: the cycles 0..n-1 (packed as at settlement: the force's cycles, then the answered
    /// one) must fold from the genesis of `salt` to the attested state. The job becomes Finished (Completed) with v1's
    /// counts and the cycles root stored, so neither party can stall it by withholding the Settlement.
    /// @param jobId The job.
    /// @param salt The drafter's salt (its Drafts').
    /// @param cycles The cycles 0..n-1, packed.
    function completeAnswered(uint256 jobId, uint64 salt, bytes calldata cycles) external;

    /// @notice Ends running job `jobId` that nobody settled or forced by its idle deadline (anyone; the requester
    /// gets its whole escrow back): no cycle is paid and nobody is slashed, since either party could have forced the
    /// other (an honest party whose counterparty went silent forces it well before this deadline).
    /// @param jobId The job.
    function claimIdle(uint256 jobId) external;

    // ------------------------------------------------------------------ views

    /// @notice The market whose transcript jobs this contract ends.
    /// @return The market.
    function market() external view returns (IInferenceMarket);

    /// @notice Stake (wei) slashed from each signer of a cycle a rule challenge refutes.
    /// @return The slash.
    function ruleSlash() external view returns (uint256);

    /// @notice The challenger's share (basis points, < 10,000) of the smaller of the two rule-challenge slashes.
    /// @return The share.
    function ruleRewardBps() external view returns (uint256);

    /// @notice When running transcript job `jobId` may be claimed idle (`claimIdle`): v1's longest job after the
    /// acceptance (maxTokens cycles, each within commitTimeout + verifyTimeout), and never sooner than one phase pair
    /// after the last attested state (so an answered force leaves the forcer time to force again).
    /// @param jobId The job.
    /// @return The deadline (a timestamp).
    function idleDeadline(uint256 jobId) external view returns (uint256);

    /// @notice The settled cycles root of `jobId`, its cycle count and whether a rule challenge convicted it.
    /// @param jobId The job.
    /// @return The job's settlement record.
    function settled(uint256 jobId) external view returns (Settled memory);

    /// @notice The pending force move of `jobId` (`silent` zero: none).
    /// @param jobId The job.
    /// @return The force move.
    function forceOf(uint256 jobId) external view returns (Force memory);

    /// @notice This contract's EIP-712 domain separator (transcript messages are signed under it).
    /// @return The separator.
    function domainSeparator() external view returns (bytes32);
}
