// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IInferenceMarket
/// @notice The inference market's types, events and errors, and what the dispute manager, the staking registry
/// and the transcript settlement call on it.
interface IInferenceMarket {
    enum JobStatus {
        None, // no such job
        Open, // submitted, waiting for the verifier's acceptJob
        Running, // cycles in progress
        Finished, // generation ended (EOS / maxTokens / a timeout); challenge window running
        Finalized // paid out; no dispute can be opened any more
    }

    /// @notice Where a running job waits.
    enum Phase {
        AwaitDraft, // the drafter's commitDraft for `cycle`
        AwaitVerify // the verifier's submitVerification for `cycle`
    }

    /// @notice Why a job stopped generating.
    enum FinishReason {
        Completed, // EOS or maxTokens
        AcceptTimeout, // the verifier never accepted (no slash: accepting is consent)
        DraftTimeout, // the drafter missed a commit deadline
        VerifyTimeout, // the verifier missed a verification deadline
        DisputeLost // a dispute found a party cheating
    }

    /// @notice What a requester asks for in `submitJob`.
    struct JobRequest {
        bytes32 draftModel;
        bytes32 targetModel;
        address drafter;
        address verifier;
        uint8 gamma; // proposals per cycle K, 1..16
        uint64 temperature; // WAD; 0 = greedy
        uint32 topK; // 0 = off
        uint64 topP; // WAD, 1..WAD (WAD = off)
        uint16 maxTokens; // tokens to generate, ≥ 1
        uint32 eosToken; // generation stops after emitting it
        uint128 pricePerAcceptedToken; // wei to the drafter per accepted (and emitted) proposal
        uint128 pricePerPass; // wei to the verifier per verified cycle (target pass)
    }

    /// @notice How a transcript job ends (TranscriptSettlement → market.transcriptFinish): the counts a v1 job would
    /// hold after the same verified cycles, and who (if anyone) missed a force move's deadline.
    struct TranscriptOutcome {
        uint16 cycles; // cycles settled (target passes)
        uint16 emitted; // output tokens
        uint16 rejected; // cycles with a counted rejection (α window)
        bool outCut; // the last cycle's outToken was cut (EOS / maxTokens first)
        uint64 salt; // the drafter's salt
        FinishReason reason; // Completed (settlement) or the silent party's timeout
        address silent; // the party that missed a force move's deadline (zero: none)
        bool slash; // slash `silent` timeoutSlash (false for a drafter that never signed a draft)
    }

    struct JobParties {
        address requester;
        address drafter;
        address verifier;
        bytes32 draftModel;
        bytes32 targetModel;
    }

    /// @notice A job as the `getJob` view returns it.
    struct JobView {
        address requester;
        address drafter;
        address verifier;
        bytes32 draftModel;
        bytes32 targetModel;
        JobStatus status;
        Phase phase;
        uint8 gamma;
        bool alphaEligible;
        uint16 cycle;
        uint16 emitted;
        uint16 rejected; // verified cycles with a rejection (α window)
        uint16 maxTokens;
        uint32 eosToken;
        uint256 deadline;
        uint16 openDisputes;
        uint96 escrow;
        uint128 pricePerAcceptedToken;
        uint128 pricePerPass;
        uint256 drafterTokens; // accepted proposals emitted so far (what the drafter is paid for)
        bool drafterForfeited;
        bool verifierForfeited;
        bytes32 commitment;
        uint64 salt; // the drafter's salt (committed with the cycle-0 draft; 0 before it)
        uint32 vocabSize; // the job's vocabulary size
        bool transcript; // a transcript-mode job (submitTranscriptJob)
    }

    /// @notice The deployer wired the dispute manager.
    event DisputeManagerSet(address indexed disputeManager);
    /// @notice The deployer wired the transcript settlement contract.
    event TranscriptSettlementSet(address indexed transcriptSettlement);
    /// @notice The deployer wired the probe scheduler: from now on only its jobs move α windows.
    event ProbeSchedulerSet(address indexed probeScheduler);
    /// @notice A regular job's α at the reference settings, published as a statistic (it never moves the window).
    event AlphaObserved(uint256 indexed jobId, address indexed drafter, uint256 cycles, uint256 accepted, uint256 rejected);
    /// @notice `jobId` (just submitted, see JobSubmitted) runs in transcript mode.
    event TranscriptJobSubmitted(uint256 indexed jobId);
    /// @notice A pulled cycle of transcript job `jobId`: its record hash is now what `cycleRecordHash` serves.
    event TranscriptRecordStored(uint256 indexed jobId, uint32 cycle, bytes32 recordHash);
    /// @notice A rule challenge convicted both signers of `jobId`: slashed `fromDrafter` and `fromVerifier` wei,
    /// `reward` of it owed to `challenger`, the rest to the treasury.
    event TranscriptConvicted(
        uint256 indexed jobId, address indexed challenger, uint256 fromDrafter, uint256 fromVerifier, uint256 reward
    );
    /// @notice A job was submitted with `escrow` wei; `prompt` is the token-id input, as the node encodes it.
    event JobSubmitted(
        uint256 indexed jobId, address indexed requester, JobRequest request, bytes prompt, uint256 escrow
    );
    /// @notice The verifier accepted `jobId`, committing to hash-chain head `chainHead`.
    event JobAccepted(uint256 indexed jobId, bytes32 chainHead);
    /// @notice The drafter committed its per-job `salt` with the cycle-0 draft; it enters the accept and residual
    /// uniforms of every cycle of `jobId` (docs/protocol.md §3).
    event SaltCommitted(uint256 indexed jobId, uint64 salt);
    /// @notice The drafter committed cycle `cycle`'s proposals and their draft probabilities (`draft`).
    /// @dev `draft` packs each proposal i as 12 big-endian bytes: token (uint32) ‖ q (uint64).
    event DraftCommitted(uint256 indexed jobId, uint256 cycle, bytes32 draftRoot, bytes draft);
    /// @notice Cycle `cycle` was verified with hash-chain `reveal`: `accepted` proposals, residual/bonus
    /// sample `outToken`, and the cycle's output tokens `output` (4 big-endian bytes each).
    event CycleVerified(
        uint256 indexed jobId, uint256 cycle, bytes32 reveal, uint256 accepted, uint32 outToken, bytes output
    );
    /// @notice `jobId` stopped generating; `slashed` wei were taken from `party` (zero address: nobody).
    event JobFinished(uint256 indexed jobId, FinishReason reason, address party, uint256 slashed);
    /// @notice `jobId` was settled: credited to the drafter, the verifier and (refund) the requester.
    event JobFinalized(uint256 indexed jobId, uint256 drafterPay, uint256 verifierPay, uint256 refund);
    /// @notice A dispute on `jobId` was opened; `open` are now open.
    event DisputeOpened(uint256 indexed jobId, uint256 open);
    /// @notice A dispute on `jobId` against `accused` closed; `open` remain open.
    event DisputeClosed(uint256 indexed jobId, address indexed accused, bool accusedLost, uint256 open);
    /// @notice Settling `jobId` breached `drafter`'s α window: `amount` wei of its stake went to the treasury.
    event AlphaSlashed(uint256 indexed jobId, address indexed drafter, uint256 amount);
    /// @notice `account` withdrew `amount` wei.
    event Withdrawn(address indexed account, uint256 amount);
    /// @notice Drafter `drafter` declared it serves at most `capacity` jobs at once (Open or Running).
    event CapacitySet(address indexed drafter, uint256 capacity);
    /// @notice Drafter `drafter` declared the least price per accepted token (wei) of a job it takes.
    event MinPriceSet(address indexed drafter, uint256 minPrice);

    /// @dev Only the deployer may wire the dispute manager.
    error MarketNotDeployer(address caller);
    /// @dev The dispute manager is already wired.
    error MarketAlreadyWired();
    /// @dev A required address was zero, or a period was zero.
    error BadParams();
    /// @dev Only the dispute manager.
    error NotDisputeManager(address caller);
    /// @dev Only the transcript settlement contract.
    error NotTranscriptSettlement(address caller);
    /// @dev No transcript settlement contract is wired.
    error TranscriptNotWired();
    /// @dev A running transcript job takes no per-cycle move and no claimTimeout (its liveness is force moves).
    error TranscriptJob(uint256 jobId);
    /// @dev ETH arrived from someone other than the registry.
    error UnexpectedSender(address sender);
    /// @dev γ must be in 1..16.
    error BadGamma(uint256 gamma);
    /// @dev maxTokens must be ≥ 1.
    error BadMaxTokens();
    /// @dev topP must be in 1..WAD.
    error BadTopP(uint256 topP);
    /// @dev requester, drafter and verifier must be three different accounts.
    error PartiesNotDistinct();
    /// @dev The drafter is not active for the (draft, target) model pair.
    error DrafterNotActive(address drafter);
    /// @dev The verifier is not active for the target model.
    error VerifierNotActive(address verifier);
    /// @dev msg.value does not cover maxTokens × (pricePerAcceptedToken + pricePerPass).
    error InsufficientEscrow(uint256 sent, uint256 required);
    /// @dev msg.value does not fit the job's uint96 escrow field.
    error EscrowTooLarge(uint256 sent, uint256 max);
    /// @dev The job is not in a status that allows this call.
    error JobWrongStatus(uint256 jobId, JobStatus status);
    /// @dev The running job waits for the other party.
    error WrongPhase(uint256 jobId, Phase phase);
    /// @dev The caller is not the job's drafter.
    error NotJobDrafter(address caller);
    /// @dev The caller is not the job's verifier.
    error NotJobVerifier(address caller);
    /// @dev The phase's deadline has passed.
    error DeadlinePassed(uint256 deadline);
    /// @dev The deadline (or challenge window) has not passed yet.
    error DeadlineNotPassed(uint256 deadline);
    /// @dev Not the cycle the job is at.
    error WrongCycle(uint256 expected, uint256 got);
    /// @dev An array's length is not γ.
    error GammaLengthMismatch(uint256 expected, uint256 got);
    /// @dev A token out of range: a proposal that does not fit in uint32 (commitDraft), or the outToken
    /// (index γ) at or above the job's vocabulary size (submitVerification).
    error TokenOutOfRange(uint256 index, uint256 token);
    /// @dev Cycle 0 is committed with the drafter's salt, through `commitFirstDraft`.
    error FirstDraftNeedsSalt();
    /// @dev The drafter's registered vocabulary of the draft model differs from the verifier's of the target.
    error VocabMismatch(uint256 draftVocab, uint256 targetVocab);
    /// @dev `root` is not the root of (tokens, q).
    error RootMismatch(bytes32 computed, bytes32 given);
    /// @dev (tokens, q) are not the committed draft, or keccak256(reveal) is not the previous reveal.
    error CommitmentMismatch();
    /// @dev The chain head must not be zero.
    error ZeroChainHead();
    /// @dev Disputes on the job are still open.
    error DisputesOpen(uint256 open);
    /// @dev `disputeClosed` without an open dispute.
    error NoOpenDispute(uint256 jobId);
    /// @dev Nothing to withdraw.
    error NothingOwed();
    /// @dev Sending ETH to a withdrawing account failed.
    error MarketTransferFailed();
    /// @dev The drafter already has `capacity` jobs Open or Running, the most it accepts (`setCapacity`).
    error DrafterAtCapacity(address drafter, uint256 capacity);
    /// @dev A capacity must be at least 1.
    error BadCapacity();
    /// @dev The job pays `price` wei per accepted token, below the drafter's declared `minPrice` (`setMinPrice`).
    error PriceBelowDrafterMinimum(address drafter, uint256 price, uint256 minPrice);
    /// @dev Only a registered drafter declares a capacity.
    error NotRegisteredDrafter(address account);

    /// @notice Status of `jobId`.
    function jobStatus(uint256 jobId) external view returns (JobStatus);

    /// @notice Submits a per-cycle job (see the market's NatSpec); the probe scheduler submits probes through it.
    function submitJob(JobRequest calldata request, bytes calldata prompt) external payable returns (uint256 jobId);

    /// @notice Pays out everything owed to the caller.
    function withdraw() external;

    /// @notice Who takes part in `jobId` and which models it runs.
    function jobParties(uint256 jobId) external view returns (JobParties memory);

    /// @notice The stored record hash of `cycle` of `jobId` (see CycleRecord.hash); zero if not verified.
    function cycleRecordHash(uint256 jobId, uint32 cycle) external view returns (bytes32);

    /// @notice Everything about `jobId`. `deadline` is the deadline of the current phase (for a
    /// verification: the draft deadline + verifyTimeout) or the end of the challenge window.
    function getJob(uint256 jobId) external view returns (JobView memory);

    /// @notice Seconds the drafter has to commit each cycle's draft (a transcript force on the drafter: its answer).
    function commitTimeout() external view returns (uint256);

    /// @notice Seconds the verifier has to verify each committed draft (a transcript force on the verifier: its
    /// answer).
    function verifyTimeout() external view returns (uint256);

    /// @notice Seconds after a job finishes during which disputes can be opened; then `finalize`.
    /// @dev The registry checks at wiring that its unbonding period outlasts it.
    function challengeWindow() external view returns (uint256);

    /// @notice Marks a dispute open on `jobId`: finalize is blocked until every open dispute is closed.
    /// @dev Only the dispute manager. Reverts unless the job is Running or Finished.
    function disputeOpened(uint256 jobId) external;

    /// @notice Marks a dispute on `jobId` closed. When `accusedLost`, the market stops the job (if still
    /// running) and the losing party's unpaid earnings on the job are forfeited to the requester.
    /// @dev Only the dispute manager.
    function disputeClosed(uint256 jobId, address accused, bool accusedLost) external;

    /// @notice Ends running transcript job `jobId` with outcome `o`: Finished with the v1 counts (so `finalize` pays
    /// exactly as a per-cycle job), the challenge window from now, the salt recorded; slashes `o.silent`
    /// timeoutSlash when `o.slash`, burnt (credited to the market's BURN, never to the requester). A job with no
    /// cycle settles at once.
    /// @dev Only the transcript settlement contract.
    function transcriptFinish(uint256 jobId, TranscriptOutcome calldata o) external;

    /// @notice Stores the record hash of a pulled cycle of finished transcript job `jobId`, which `cycleRecordHash`
    /// then serves to the dispute manager.
    /// @dev Only the transcript settlement contract.
    function storeTranscriptRecord(uint256 jobId, uint32 cycle, bytes32 recordHash) external;

    /// @notice A rule challenge refuted a co-signed cycle of finished transcript job `jobId`: both signers forfeit
    /// their pay and lose up to `amount` of stake each; `challenger` is owed `rewardBps` of the smaller slash.
    /// @dev Only the transcript settlement contract.
    function transcriptConvict(uint256 jobId, address challenger, uint256 amount, uint256 rewardBps) external;
}
