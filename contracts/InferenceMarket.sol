// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {Hashes} from "@openzeppelin/contracts/utils/cryptography/Hashes.sol";
import {IProbeScheduler} from "./interfaces/IProbeScheduler.sol";
import {IInferenceMarket} from "./interfaces/IInferenceMarket.sol";
import {IStakingRegistry} from "./interfaces/IStakingRegistry.sol";
import {CycleRecord} from "./lib/CycleRecord.sol";
import {JobSlot} from "./lib/JobSlot.sol";
import {SpecMath} from "./lib/SpecMath.sol";
import {AlphaWindow} from "./AlphaWindow.sol";

/// @title InferenceMarket
/// @notice Jobs of verifiable speculative decoding in per-cycle on-chain mode (docs/protocol.md §4, §7):
/// escrow, the verifier's hash-chain commitment, draft commitments, the on-chain accept rule, the
/// per-cycle record hashes disputes prove against, deadlines with slashing timeouts, a challenge window,
/// and settlement by pull payments. Also the drafters' α window (inherited {AlphaWindow}).
/// @dev Gas: a draft reads job slot 0 and rewrites the per-job commitment slot; a verification reads
/// slots 0 and 1, rewrites slot 0 and the commitment slot, and creates one slot for the record hash.
/// Earnings and α counts accrue in slot 0 and settle once per job (see docs/contracts.md).
contract InferenceMarket is IInferenceMarket, AlphaWindow, ReentrancyGuardTransient {
    /// @dev Packed job state. A draft reads slot 0 and `commitment`; a verification reads slots 0 and 1 and
    /// `commitment`, and writes slot 0 (assembled in one word) and `commitment`.
    struct Job {
        // slot 0
        address drafter;
        uint8 state; // JobStatus in the low 4 bits, flags (_ELIGIBLE, ...) in the high 4
        uint8 gamma;
        uint16 cycle; // next cycle to draft / verify = cycles verified so far = target passes
        uint16 emitted; // output tokens so far
        uint16 rejected; // verified cycles with a rejection (accrued for the α window)
        uint32 deadline; // Open: accept by; Running: draft of `cycle` by (its verification: + verifyTimeout);
        // Finished: end of the challenge window
        // slot 1
        address verifier;
        uint16 maxTokens;
        uint32 eosToken;
        uint16 openDisputes;
        uint32 vocabSize; // both models' registered vocabulary: every token the chain accepts is below it
        // slot 2
        address requester;
        uint96 escrow;
        // slot 3
        uint128 pricePerAcceptedToken;
        uint128 pricePerPass;
        // slot 4, 5
        bytes32 draftModel;
        bytes32 targetModel;
        // slot 6: bits 255..65 (191 bits): awaiting a draft (bit 0 = 0): the verifier's last reveal (the chain
        // head before cycle 0); awaiting its verification (bit 0 = 1): keccak256(draftRoot, those 191 bits of
        // the last reveal, low bits zero). Bits 64..1: the drafter's salt (0 until the cycle-0 draft writes it; every later
        // write carries it). Comparisons use the 191 high bits, far beyond any collision or preimage search.
        bytes32 commitment;
    }

    uint8 private constant _STATUS_MASK = uint8(JobSlot.STATUS_MASK);
    // Transcript mode (docs/protocol.md "Transcript mode (v2)"): bit 3 of the status nibble, which a JobStatus (0..4)
    // never uses. The per-cycle entries read the whole nibble (JobSlot.status), so a transcript job is never Running
    // for them at no gas on their path; every other reader takes the status from the low 3 bits.
    uint8 private constant _TRANSCRIPT = 0x08;
    uint8 private constant _STATUS_BITS = 0x07;
    uint8 private constant _ELIGIBLE = 0x10; // the job's cycles count toward the drafter's α window
    uint8 private constant _OUT_CUT = 0x20; // the last cycle's outToken was not emitted (EOS / maxTokens first)
    uint8 private constant _DRAFTER_FORFEIT = 0x40;
    uint8 private constant _VERIFIER_FORFEIT = 0x80;
    uint256 private constant _WAD = 1e18;
    uint256 private constant _PHASE_BIT = 1;
    uint256 private constant _SALT_AT = 1;
    /// @dev The salt's 64 bits in the commitment word.
    uint256 private constant _SALT_BITS = uint256(type(uint64).max) << _SALT_AT;
    /// @dev The reveal / hash part of the commitment word (bits 255..65).
    uint256 private constant _HIGH_BITS = ~(_SALT_BITS | _PHASE_BIT);
    /// @notice Largest γ (proposals per cycle).
    uint256 public constant MAX_GAMMA = 16;
    /// @notice Concurrent jobs (Open or Running) of a drafter that never called {setCapacity}: what one drafter node
    /// serves at once on one device at the protocol's deadlines (docs/protocol.md "Soundness (v1.2)").
    uint256 public constant DEFAULT_CAPACITY = 4;

    /// @notice The staking registry.
    IStakingRegistry public immutable registry;
    /// @notice The account that may wire the dispute manager, once.
    address public immutable deployer;
    /// @notice Seconds the verifier has to accept a job.
    uint256 public immutable acceptTimeout;
    /// @notice Seconds the drafter has to commit each cycle's draft.
    uint256 public immutable commitTimeout;
    /// @notice Seconds the verifier has to verify each committed draft.
    uint256 public immutable verifyTimeout;
    /// @notice Seconds after a job finishes during which disputes can be opened; then `finalize`.
    uint256 public immutable challengeWindow;
    /// @notice Stake (wei) slashed from a party that misses a deadline, burnt (credited to {BURN}).
    uint256 public immutable timeoutSlash;
    /// @notice Where timeout slashes go: the burn address, whose key nobody holds (docs/protocol.md §7, "v1.2").
    /// Never the requester, who chose both the slashed party and its counterparty, nor the treasury, which the
    /// deployer picks (it may be anyone's).
    address public constant BURN = 0x000000000000000000000000000000000000dEaD;

    /// @notice The dispute manager; zero until wired.
    address public disputeManager;
    /// @notice The transcript-mode settlement contract (TranscriptSettlement); zero until wired.
    address public transcriptSettlement;
    /// @notice The probe scheduler (docs/protocol.md "Soundness (v1.2)"): the only requester whose jobs enter the
    /// drafters' α windows; 0 until wired.
    address public probeScheduler;
    /// @notice Id of the last job submitted (ids start at 1).
    uint256 public jobCount;
    /// @notice Wei each account can `withdraw`.
    mapping(address account => uint256) public owed;

    mapping(uint256 jobId => Job) private _jobs;
    mapping(uint256 jobId => mapping(uint256 cycle => bytes32)) private _records;

    /// @dev A drafter's load (one slot): its jobs that are Open or Running, and its declared capacity (0: never
    /// declared, DEFAULT_CAPACITY; a declared capacity is ≥ 1).
    struct DrafterLoad {
        uint32 live;
        uint32 capacity;
        // α of its regular (non-probe) jobs at the reference settings: a statistic, never the window (v1.2)
        uint64 observedCycles;
        uint64 observedAccepted;
        uint64 observedRejected;
    }

    mapping(address drafter => DrafterLoad) private _loads;
    /// @notice The least price per accepted token (wei) of a job each drafter takes: `submitJob` refuses a job below
    /// it (0: never declared, any price). A probe pays the floor and is never refused.
    mapping(address drafter => uint256) public minPriceOf;

    /// @param registry_ The staking registry.
    /// @param acceptTimeout_ Seconds the verifier has to accept a job.
    /// @param commitTimeout_ Seconds the drafter has per draft.
    /// @param verifyTimeout_ Seconds the verifier has per verification.
    /// @param challengeWindow_ Seconds for disputes after a job finishes.
    /// @param timeoutSlash_ Wei slashed from a party that misses its deadline.
    /// @param alphaBucketCycles_ α window: cycles per bucket M (window N = 8 M).
    /// @param alphaTolerance_ α window: τ (WAD).
    /// @param alphaSlashBps_ α window: share of stake slashed on a breach (basis points).
    /// @param alphaPriceFloor_ α window: least pricePerPass (wei) of a job whose cycles count.
    /// @param alphaFeeBps_ α window: share of pricePerPass of each counted cycle paid to the treasury (basis points).
    /// @param treasury_ Receives α slashes and fees (non-zero; the burn address 0x…dEaD burns them).
    constructor(
        address registry_,
        uint256 acceptTimeout_,
        uint256 commitTimeout_,
        uint256 verifyTimeout_,
        uint256 challengeWindow_,
        uint256 timeoutSlash_,
        uint256 alphaBucketCycles_,
        uint256 alphaTolerance_,
        uint256 alphaSlashBps_,
        uint256 alphaPriceFloor_,
        uint256 alphaFeeBps_,
        address treasury_
    ) AlphaWindow(alphaBucketCycles_, alphaTolerance_, alphaSlashBps_, alphaPriceFloor_, alphaFeeBps_, treasury_) {
        if (
            registry_ == address(0) || acceptTimeout_ == 0 || commitTimeout_ == 0 || verifyTimeout_ == 0
                || challengeWindow_ == 0
        ) revert BadParams();
        registry = IStakingRegistry(registry_);
        deployer = msg.sender;
        acceptTimeout = acceptTimeout_;
        commitTimeout = commitTimeout_;
        verifyTimeout = verifyTimeout_;
        challengeWindow = challengeWindow_;
        timeoutSlash = timeoutSlash_;
    }

    /// @notice Accepts slashed stake from the registry (and nothing else).
    receive() external payable {
        if (msg.sender != address(registry)) revert UnexpectedSender(msg.sender);
    }

    /// @notice Wires the dispute manager; callable once, by the deployer.
    function setDisputeManager(address disputeManager_) external {
        if (msg.sender != deployer) revert MarketNotDeployer(msg.sender);
        if (disputeManager != address(0)) revert MarketAlreadyWired();
        if (disputeManager_ == address(0)) revert BadParams();
        disputeManager = disputeManager_;
        emit DisputeManagerSet(disputeManager_);
    }

    /// @notice Wires the transcript-mode settlement contract; callable once, by the deployer.
    /// @param transcriptSettlement_ The TranscriptSettlement that settles, challenges and force-moves transcript jobs.
    function setTranscriptSettlement(address transcriptSettlement_) external {
        if (msg.sender != deployer) revert MarketNotDeployer(msg.sender);
        if (transcriptSettlement != address(0)) revert MarketAlreadyWired();
        if (transcriptSettlement_ == address(0)) revert BadParams();
        transcriptSettlement = transcriptSettlement_;
        emit TranscriptSettlementSet(transcriptSettlement_);
    }

    /// @notice Wires the probe scheduler; callable once, by the deployer. From then on only its jobs (probes) move
    /// the drafters' α windows; every other job's α is published as a statistic ({AlphaObserved}). A deployment
    /// that never wires one keeps v1.1's window (every α-eligible job counts).
    /// @param probeScheduler_ The ProbeScheduler that opens probe jobs.
    function setProbeScheduler(address probeScheduler_) external {
        if (msg.sender != deployer) revert MarketNotDeployer(msg.sender);
        if (probeScheduler != address(0)) revert MarketAlreadyWired();
        if (probeScheduler_ == address(0)) revert BadParams();
        probeScheduler = probeScheduler_;
        emit ProbeSchedulerSet(probeScheduler_);
    }

    /// @notice The α of `drafter`'s regular jobs at the reference settings, summed over every settled one: cycles,
    /// accepted proposals emitted and cycles with a rejection (α̂ = accepted / (accepted + rejected)). A statistic
    /// requesters may rank by; the α window (and its slash) counts probes only.
    function alphaObservedOf(address drafter) external view returns (uint256 cycles, uint256 accepted, uint256 rejected) {
        DrafterLoad storage load = _loads[drafter];
        return (load.observedCycles, load.observedAccepted, load.observedRejected);
    }

    // ------------------------------------------------------------------ drafter capacity (v1.2)

    /// @notice The calling drafter declares how many jobs it serves at once: `submitJob` and `submitTranscriptJob`
    /// refuse a job that would give it more than `capacity` Open or Running jobs ({DrafterAtCapacity}). Jobs it has
    /// already are kept when it lowers its capacity below them. Emits {CapacitySet}.
    /// @param capacity Concurrent jobs, ≥ 1 (a drafter that takes no jobs unbonds).
    function setCapacity(uint32 capacity) external {
        if (registry.roleOf(msg.sender) != IStakingRegistry.Role.Drafter) revert NotRegisteredDrafter(msg.sender);
        if (capacity == 0) revert BadCapacity();
        _loads[msg.sender].capacity = capacity;
        emit CapacitySet(msg.sender, capacity);
    }

    /// @notice Declares the least price per accepted token (wei) of a job the caller, a registered drafter, takes:
    /// `submitJob` refuses a cheaper job ({PriceBelowDrafterMinimum}), so nobody can hold the drafter's capacity
    /// with jobs it would not serve (docs/protocol.md "Soundness (v1.2)", threat-model row 118). Jobs it has already
    /// are kept. Emits {MinPriceSet}.
    /// @param minPrice Wei per accepted token; 0 takes any price.
    function setMinPrice(uint256 minPrice) external {
        if (registry.roleOf(msg.sender) != IStakingRegistry.Role.Drafter) revert NotRegisteredDrafter(msg.sender);
        minPriceOf[msg.sender] = minPrice;
        emit MinPriceSet(msg.sender, minPrice);
    }

    /// @notice `drafter`'s Open or Running jobs (`live`) and the most it accepts (`capacity`: its declared one, or
    /// DEFAULT_CAPACITY); `submitJob` takes a job for it while live < capacity.
    function drafterLoad(address drafter) external view returns (uint256 live, uint256 capacity) {
        DrafterLoad storage load = _loads[drafter];
        live = load.live;
        capacity = load.capacity == 0 ? DEFAULT_CAPACITY : load.capacity;
    }

    // ------------------------------------------------------------------ job lifecycle

    /// @notice Submits a job with escrow `msg.value` ≥ maxTokens × (pricePerAcceptedToken + pricePerPass);
    /// any excess is refunded at finalize. Locks the drafter's and the verifier's stakes until finalize.
    /// @dev The job's cycles count toward the drafter's α window only at the reference sampling settings
    /// temperature = WAD, topK = 0, topP = WAD (the drafter's claim is per model pair at those settings) and
    /// when pricePerPass ≥ alphaPriceFloor; the treasury cannot be a party.
    /// @return jobId The new job's id.
    function submitJob(JobRequest calldata request, bytes calldata prompt) external payable returns (uint256 jobId) {
        jobId = _submit(request, prompt, 0);
    }

    /// @notice Submits a transcript-mode job (docs/protocol.md "Transcript mode (v2)"): as {submitJob}, but its cycles
    /// run off chain between drafter and verifier and the job ends through the TranscriptSettlement contract
    /// (settlement, force moves); `commitDraft`/`submitVerification` and `claimTimeout` refuse it while it runs.
    /// @param request The job, as for {submitJob}.
    /// @param prompt The prompt bytes, as for {submitJob}.
    /// @return jobId The new job's id.
    function submitTranscriptJob(JobRequest calldata request, bytes calldata prompt)
        external
        payable
        returns (uint256 jobId)
    {
        if (transcriptSettlement == address(0)) revert TranscriptNotWired();
        jobId = _submit(request, prompt, _TRANSCRIPT);
    }

    function _submit(JobRequest calldata request, bytes calldata prompt, uint8 mode) private returns (uint256 jobId) {
        if (request.gamma == 0 || request.gamma > MAX_GAMMA) revert BadGamma(request.gamma);
        if (request.maxTokens == 0) revert BadMaxTokens();
        if (request.topP == 0 || request.topP > _WAD) revert BadTopP(request.topP);
        address drafter = request.drafter;
        address verifier = request.verifier;
        if (drafter == verifier || drafter == msg.sender || verifier == msg.sender) revert PartiesNotDistinct();
        _checkNotTreasury(drafter, verifier);
        if (!registry.isActiveDrafter(drafter, request.draftModel, request.targetModel)) {
            revert DrafterNotActive(drafter);
        }
        if (!registry.isActive(verifier, IStakingRegistry.Role.Verifier, request.targetModel)) {
            revert VerifierNotActive(verifier);
        }
        uint256 vocab = _jobVocab(drafter, request.draftModel, verifier, request.targetModel);
        _takeCapacity(drafter, msg.sender == probeScheduler, request.pricePerAcceptedToken);
        uint256 required =
            uint256(request.maxTokens) * (uint256(request.pricePerAcceptedToken) + request.pricePerPass);
        if (msg.value < required) revert InsufficientEscrow(msg.value, required);
        if (msg.value > type(uint96).max) revert EscrowTooLarge(msg.value, type(uint96).max);

        jobId = ++jobCount;
        Job storage job = _jobs[jobId];
        bool eligible = request.temperature == _WAD && request.topK == 0 && request.topP == _WAD
            && request.pricePerPass >= alphaPriceFloor;
        job.drafter = drafter;
        job.state = uint8(JobStatus.Open) | (eligible ? _ELIGIBLE : 0) | mode;
        job.gamma = request.gamma;
        job.deadline = uint32(block.timestamp + acceptTimeout);
        job.verifier = verifier;
        job.maxTokens = request.maxTokens;
        job.eosToken = request.eosToken;
        job.vocabSize = uint32(vocab);
        job.requester = msg.sender;
        job.escrow = uint96(msg.value);
        job.pricePerAcceptedToken = request.pricePerAcceptedToken;
        job.pricePerPass = request.pricePerPass;
        job.draftModel = request.draftModel;
        job.targetModel = request.targetModel;
        emit JobSubmitted(jobId, msg.sender, request, prompt, msg.value);
        if (mode != 0) emit TranscriptJobSubmitted(jobId);
        registry.lock(drafter);
        registry.lock(verifier);
    }

    /// @notice The assigned verifier accepts `jobId`, committing to its randomness hash-chain head
    /// `chainHead` = H^L(seed) with L ≥ maxTokens (a shorter chain runs out and the verifier times out).
    function acceptJob(uint256 jobId, bytes32 chainHead) external {
        Job storage job = _jobs[jobId];
        JobStatus status = _status(job);
        if (status != JobStatus.Open) revert JobWrongStatus(jobId, status);
        if (msg.sender != job.verifier) revert NotJobVerifier(msg.sender);
        if (block.timestamp > job.deadline) revert DeadlinePassed(job.deadline);
        if (chainHead == bytes32(0)) revert ZeroChainHead();
        _setStatus(job, JobStatus.Running);
        job.deadline = uint32(block.timestamp + commitTimeout);
        job.commitment = bytes32(uint256(chainHead) & _HIGH_BITS); // phase: AwaitDraft, no salt yet
        emit JobAccepted(jobId, chainHead);
    }

    /// @notice The drafter commits the first draft (cycle 0) with its per-job `salt`, chosen after the verifier's
    /// chain head is on chain: the salt enters the accept and residual uniforms of every cycle of the job
    /// (docs/protocol.md §3, "Randomness nobody can choose"), so neither party can steer them. Otherwise as
    /// {commitDraft}. Emits {SaltCommitted} and {DraftCommitted}.
    function commitFirstDraft(uint256 jobId, bytes32 root, uint32[] calldata tokens, uint64[] calldata q, uint64 salt)
        external
    {
        _commitDraft(jobId, 0, root, tokens, q, uint256(salt) << _SALT_AT);
        emit SaltCommitted(jobId, salt);
    }

    /// @notice The drafter commits cycle `cycle`'s γ proposals `tokens` with their draft probabilities `q`
    /// (WAD, 1..WAD); `root` must be their draft root (SpecMath.leaf / SpecMath.root). The proposals are
    /// emitted (packed) so that the verifier, and anyone, has them. Cycle 0 goes through {commitFirstDraft}
    /// (reverts {FirstDraftNeedsSalt} here).
    function commitDraft(uint256 jobId, uint32 cycle, bytes32 root, uint32[] calldata tokens, uint64[] calldata q)
        external
    {
        if (cycle == 0) revert FirstDraftNeedsSalt();
        _commitDraft(jobId, cycle, root, tokens, q, 0);
    }

    /// @dev The draft commit of both entries: checks, range checks, root, then the commitment word
    /// keccak256(root, the word's high bits) in the high bits, the salt bits kept (`saltBits` only ORs in the cycle-0 salt) and
    /// the phase bit set.
    function _commitDraft(
        uint256 jobId,
        uint32 cycle,
        bytes32 root,
        uint32[] calldata tokens,
        uint64[] calldata q,
        uint256 saltBits
    ) private {
        Job storage job = _jobs[jobId];
        uint256 head = _runningSlot0(jobId, job);
        {
            address drafter = JobSlot.drafter(head);
            if (msg.sender != drafter) revert NotJobDrafter(msg.sender);
        }
        uint256 last = uint256(job.commitment);
        if (last & _PHASE_BIT != 0) revert WrongPhase(jobId, Phase.AwaitVerify);
        {
            uint256 deadline = JobSlot.deadline(head);
            if (block.timestamp > deadline) revert DeadlinePassed(deadline);
            uint256 expected = JobSlot.cycle(head);
            if (cycle != expected) revert WrongCycle(expected, cycle);
            uint256 k = JobSlot.gamma(head);
            if (tokens.length != k) revert GammaLengthMismatch(k, tokens.length);
            if (q.length != k) revert GammaLengthMismatch(k, q.length);
        }
        bytes memory packed = _packDraft(tokens, q);
        {
            bytes32 computed = SpecMath.draftRootCalldata(jobId, cycle, tokens, q);
            if (computed != root) revert RootMismatch(computed, root);
        }
        // phase: AwaitVerify
        job.commitment = bytes32(
            (uint256(Hashes.efficientKeccak256(root, bytes32(last & _HIGH_BITS))) & _HIGH_BITS) | (last & _SALT_BITS)
                | saltBits
                | _PHASE_BIT
        );
        emit DraftCommitted(jobId, cycle, root, packed);
    }

    /// @notice The verifier verifies cycle `cycle`: the committed draft (`tokens`, `q`), the target's
    /// probabilities `p` (p[i] = p_i(tokens[i]), WAD), its hash-chain `reveal` for this cycle and the
    /// residual/bonus sample `outToken`. The contract applies the accept rule, stores the cycle record,
    /// emits the cycle's output tokens (the accepted proposals then outToken, cut after EOS or at
    /// maxTokens) and accrues earnings and α counts. The job finishes at EOS/maxTokens.
    /// @dev Deadline: the cycle's draft deadline + verifyTimeout. The uniforms take the job's salt. Token ranges
    /// (docs/protocol.md §4): outToken ≥ the job's vocabulary reverts {TokenOutOfRange} (index γ); a proposal ≥
    /// the vocabulary has target probability 0, so the accept count stops before the first such proposal
    /// whatever p says (none is ever accepted or emitted).
    function submitVerification(
        uint256 jobId,
        uint32 cycle,
        uint32[] calldata tokens,
        uint64[] calldata q,
        uint64[] calldata p,
        bytes32 reveal,
        uint32 outToken
    ) external {
        Job storage job = _jobs[jobId];
        // `info`: job slot 1 with the verifier's field (checked) replaced by the job's salt
        (uint256 head, uint256 info, bytes32 root) = _checkVerification(jobId, job, cycle, tokens, q, p.length, reveal);
        uint256 accepted = SpecMath.countAcceptedCalldata(reveal, root, q, p, uint64(info));
        accepted = _capAtVocab(tokens, accepted, info, outToken);
        _storeRecord(jobId, cycle, root, p, accepted, outToken);
        _advance(jobId, tokens, reveal, outToken, job, head, info, accepted);
    }

    /// @notice Ends a job whose current deadline passed (callable by anyone). A verifier that never
    /// accepted is not slashed (the job is cancelled and refunded). A drafter that misses a draft
    /// deadline after having committed at least once, or a verifier that misses a verification deadline,
    /// loses `timeoutSlash` of stake, burnt (credited to {BURN}: never to the requester, who chose both parties).
    /// The job then finishes (challenge window) or, when no cycle was verified, settles at once.
    function claimTimeout(uint256 jobId) external nonReentrant {
        Job storage job = _jobs[jobId];
        JobStatus status = _status(job);
        uint256 deadline = job.deadline;
// slither-disable-next-line uninitialized-local (set on every branch that does not revert)
        FinishReason reason;
        address party = address(0); // nobody is slashed unless a branch names the party
        if (status == JobStatus.Open) {
            reason = FinishReason.AcceptTimeout;
        } else if (status == JobStatus.Running) {
            if (job.state & _TRANSCRIPT != 0) revert TranscriptJob(jobId); // its liveness: force moves
            if (uint256(job.commitment) & _PHASE_BIT == 0) {
                reason = FinishReason.DraftTimeout;
                if (job.cycle > 0) party = job.drafter; // its first commit is the drafter's consent
            } else {
                reason = FinishReason.VerifyTimeout;
                party = job.verifier;
                deadline += verifyTimeout;
                job.state &= ~_ELIGIBLE; // a verifier fault: the job's cycles never enter the drafter's window
            }
        } else {
            revert JobWrongStatus(jobId, status);
        }
        if (block.timestamp <= deadline) revert DeadlineNotPassed(deadline);
// slither-disable-next-line reentrancy-no-eth (nonReentrant; the calls go only to the protocol's own registry)
        _stop(job);
        uint256 taken = 0;
        if (party != address(0) && timeoutSlash != 0) {
            // slither-disable-next-line reentrancy-benign (nonReentrant; the protocol's registry pays the slash in)
            taken = registry.slash(party, timeoutSlash);
            owed[BURN] += taken; // burnt: the requester chose both parties (v1.2)
        }
        emit JobFinished(jobId, reason, party, taken);
        // slither-disable-next-line reentrancy-no-eth (nonReentrant; the calls go only to the protocol's own registry)
        if (job.cycle == 0) _settle(jobId, job);
        if (job.requester == probeScheduler) _probeTimedOut(jobId, job, reason);
    }

    /// @dev A probe timed out. The drafter's silence (before its first commit too: declining a probe whose prompt it
    /// dislikes must not pay) enters its window at α = 0: every token still owed as a cycle with nothing accepted. A
    /// verifier's abort (its slash is burnt) sends the probe back to the scheduler, which draws another verifier.
    function _probeTimedOut(uint256 jobId, Job storage job, FinishReason reason) private {
        if (reason == FinishReason.DraftTimeout) {
            uint256 owedTokens = uint256(job.maxTokens) - job.emitted;
            _recordAlpha(jobId, job.drafter, owedTokens, 0, owedTokens);
        } else {
            // slither-disable-next-line reentrancy-no-eth,reentrancy-events (nonReentrant; the protocol's own scheduler)
            IProbeScheduler(probeScheduler).probeAborted(jobId, job.verifier);
        }
    }

    /// @notice Settles a finished job once its challenge window has passed with no open dispute: credits
    /// the drafter (accepted emitted tokens × price), the verifier (passes × price, less the α fee when the
    /// job's cycles count toward α: to the treasury) and refunds the rest of the escrow to the requester (a
    /// party that lost a dispute forfeits its share to the requester); records the job's cycles in the
    /// drafter's α window (docs/contracts.md "α window"); unlocks the parties' stakes. Callable by anyone.
    function finalize(uint256 jobId) external nonReentrant {
        Job storage job = _jobs[jobId];
        JobStatus status = _status(job);
        if (status != JobStatus.Finished) revert JobWrongStatus(jobId, status);
        if (block.timestamp <= job.deadline) revert DeadlineNotPassed(job.deadline);
        if (job.openDisputes != 0) revert DisputesOpen(job.openDisputes);
        _settle(jobId, job);
    }

    /// @notice Pays out everything owed to the caller.
    function withdraw() external nonReentrant {
        uint256 amount = owed[msg.sender];
        if (amount == 0) revert NothingOwed();
        owed[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        // slither-disable-next-line low-level-calls (pull payment of the caller's balance, zeroed first)
        (bool ok,) = payable(msg.sender).call{value: amount}("");
        if (!ok) revert MarketTransferFailed();
    }

    // ------------------------------------------------------------------ dispute hooks

    /// @inheritdoc IInferenceMarket
    function disputeOpened(uint256 jobId) external {
        if (msg.sender != disputeManager || msg.sender == address(0)) revert NotDisputeManager(msg.sender);
        Job storage job = _jobs[jobId];
        JobStatus status = _status(job);
        if (status != JobStatus.Running && status != JobStatus.Finished) revert JobWrongStatus(jobId, status);
        uint256 open = job.openDisputes + 1;
        job.openDisputes = uint16(open);
        emit DisputeOpened(jobId, open);
    }

    /// @inheritdoc IInferenceMarket
    function disputeClosed(uint256 jobId, address accused, bool accusedLost) external nonReentrant {
        if (msg.sender != disputeManager || msg.sender == address(0)) revert NotDisputeManager(msg.sender);
        Job storage job = _jobs[jobId];
        uint256 open = job.openDisputes;
        if (open == 0) revert NoOpenDispute(jobId);
        job.openDisputes = uint16(open - 1);
        emit DisputeClosed(jobId, accused, accusedLost, open - 1);
        if (!accusedLost) return;
        // A convicted party forfeits, and the job's cycles never enter the drafter's α window.
        if (accused == job.drafter) job.state = (job.state | _DRAFTER_FORFEIT) & ~_ELIGIBLE;
        else if (accused == job.verifier) job.state = (job.state | _VERIFIER_FORFEIT) & ~_ELIGIBLE;
        if (_status(job) == JobStatus.Running) {
            _stop(job);
            emit JobFinished(jobId, FinishReason.DisputeLost, accused, 0);
        }
    }

    // ------------------------------------------------------------------ transcript hooks

    /// @inheritdoc IInferenceMarket
    function transcriptFinish(uint256 jobId, TranscriptOutcome calldata o) external nonReentrant {
        Job storage job = _transcriptJob(jobId, JobStatus.Running);
        uint256 head;
        assembly ("memory-safe") {
            head := sload(job.slot)
        }
        uint256 state = (JobSlot.state(head) & ~uint256(_STATUS_BITS)) | uint8(JobStatus.Finished)
            | (o.outCut ? _OUT_CUT : 0);
        if (o.silent != address(0) && o.silent == job.verifier) state &= ~uint256(_ELIGIBLE); // as a verify timeout
        uint256 next = JobSlot.pack(
            JobSlot.drafter(head), state, JobSlot.gamma(head), o.cycles, o.emitted, o.rejected,
            block.timestamp + challengeWindow
        );
        assembly ("memory-safe") {
            sstore(job.slot, next)
        }
        // the salt where per-cycle jobs keep it (getJob.salt, SaltCommitted): referees replay pulled cycles with it
        job.commitment = bytes32((uint256(job.commitment) & _HIGH_BITS) | (uint256(o.salt) << _SALT_AT));
        emit SaltCommitted(jobId, o.salt);
        _releaseCapacity(JobSlot.drafter(head));
        uint256 taken = 0;
        if (o.silent != address(0) && o.slash) {
            // slither-disable-next-line reentrancy-benign,reentrancy-no-eth (nonReentrant; the protocol's registry pays in)
            taken = registry.slash(o.silent, timeoutSlash);
            owed[BURN] += taken; // burnt: the requester chose both parties (v1.2)
        }
        emit JobFinished(jobId, o.reason, o.silent, taken);
        // slither-disable-next-line reentrancy-no-eth (nonReentrant; the calls go only to the protocol's own registry)
        if (o.cycles == 0) _settle(jobId, job);
    }

    /// @inheritdoc IInferenceMarket
    /// @dev Named for its selector: the dispatcher reaches commitDraft and submitVerification in no more steps than
    /// before transcript mode (docs/contracts.md, "Transcript mode").
    function storeTranscriptRecord(uint256 jobId, uint32 cycle, bytes32 recordHash) external {
        _transcriptJob(jobId, JobStatus.Finished);
        _records[jobId][cycle] = recordHash;
        emit TranscriptRecordStored(jobId, cycle, recordHash);
    }

    /// @inheritdoc IInferenceMarket
    function transcriptConvict(uint256 jobId, address challenger, uint256 amount, uint256 rewardBps)
        external
        nonReentrant
    {
        Job storage job = _transcriptJob(jobId, JobStatus.Finished);
        // both signed a cycle the rule refutes: both forfeit (the requester's escrow comes back whole at finalize),
        // and the job's cycles never enter the drafter's α window
        job.state = (job.state | _DRAFTER_FORFEIT | _VERIFIER_FORFEIT) & ~_ELIGIBLE;
        address drafter = job.drafter;
        address verifier = job.verifier;
        // slither-disable-next-line reentrancy-benign,reentrancy-no-eth (nonReentrant; the protocol's registry pays in)
        uint256 fromDrafter = registry.slash(drafter, amount);
        // slither-disable-next-line reentrancy-benign,reentrancy-no-eth (nonReentrant; the protocol's registry pays in)
        uint256 fromVerifier = registry.slash(verifier, amount);
        // The reward is a share of the smaller of the two slashes, so a challenger allied with either signer (or
        // with both, or with the requester) gets back less than that signer lost: nobody profits from provoking it.
        uint256 reward = (fromDrafter < fromVerifier ? fromDrafter : fromVerifier) * rewardBps / 10_000;
        owed[challenger] += reward;
        owed[treasury] += fromDrafter + fromVerifier - reward;
        emit TranscriptConvicted(jobId, challenger, fromDrafter, fromVerifier, reward);
    }

    /// @dev The transcript job `jobId` in `status`, called by the transcript settlement contract.
    function _transcriptJob(uint256 jobId, JobStatus status) private view returns (Job storage job) {
        if (msg.sender != transcriptSettlement || msg.sender == address(0)) revert NotTranscriptSettlement(msg.sender);
        job = _jobs[jobId];
        JobStatus current = _status(job);
        if (job.state & _TRANSCRIPT == 0 || current != status) revert JobWrongStatus(jobId, current);
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IInferenceMarket
    function jobStatus(uint256 jobId) external view returns (JobStatus) {
        return _status(_jobs[jobId]);
    }

    /// @inheritdoc IInferenceMarket
    function jobParties(uint256 jobId) external view returns (JobParties memory) {
        Job storage job = _jobs[jobId];
        return JobParties(job.requester, job.drafter, job.verifier, job.draftModel, job.targetModel);
    }

    /// @inheritdoc IInferenceMarket
    function cycleRecordHash(uint256 jobId, uint32 cycle) external view returns (bytes32) {
        return _records[jobId][cycle];
    }

    /// @inheritdoc IInferenceMarket
    function getJob(uint256 jobId) external view returns (JobView memory v) {
        Job storage job = _jobs[jobId];
        uint8 state = job.state;
        v.requester = job.requester;
        v.drafter = job.drafter;
        v.verifier = job.verifier;
        v.draftModel = job.draftModel;
        v.targetModel = job.targetModel;
        v.status = JobStatus(state & _STATUS_BITS);
        v.phase = uint256(job.commitment) & _PHASE_BIT == 0 ? Phase.AwaitDraft : Phase.AwaitVerify;
        v.gamma = job.gamma;
        v.alphaEligible = state & _ELIGIBLE != 0;
        v.cycle = job.cycle;
        v.emitted = job.emitted;
        v.rejected = job.rejected;
        v.maxTokens = job.maxTokens;
        v.eosToken = job.eosToken;
        v.deadline = v.status == JobStatus.Running && v.phase == Phase.AwaitVerify
            ? uint256(job.deadline) + verifyTimeout
            : job.deadline;
        v.openDisputes = job.openDisputes;
        v.escrow = job.escrow;
        v.pricePerAcceptedToken = job.pricePerAcceptedToken;
        v.pricePerPass = job.pricePerPass;
        v.drafterTokens = _drafterTokens(job);
        v.drafterForfeited = state & _DRAFTER_FORFEIT != 0;
        v.verifierForfeited = state & _VERIFIER_FORFEIT != 0;
        v.commitment = job.commitment;
        v.salt = uint64(uint256(v.commitment) >> _SALT_AT);
        v.vocabSize = job.vocabSize;
        v.transcript = state & _TRANSCRIPT != 0;
    }

    // ------------------------------------------------------------------ internals

    function _alphaAuthority() internal view override returns (address) {
        return address(registry);
    }

    function _status(Job storage job) private view returns (JobStatus) {
        return JobStatus(job.state & _STATUS_BITS);
    }

    function _setStatus(Job storage job, JobStatus status) private {
        job.state = (job.state & ~_STATUS_BITS) | uint8(status); // the mode bit stays
    }

    /// @dev Loads slot 0 of `job` and requires the job to be Running.
    function _runningSlot0(uint256 jobId, Job storage job) private view returns (uint256 head) {
        assembly ("memory-safe") {
            head := sload(job.slot)
        }
        uint256 status = JobSlot.status(head);
        // (the status bits only ever hold a JobStatus, so the conversion is needed on the revert path alone)
        if (status != uint256(JobStatus.Running)) _revertNotRunning(jobId, status);
    }

    /// @dev The revert of `_runningSlot0` (off the cycle path): a transcript job's nibble has bit 3 set.
    function _revertNotRunning(uint256 jobId, uint256 nibble) private pure {
        if (nibble & _TRANSCRIPT != 0) revert TranscriptJob(jobId);
        revert JobWrongStatus(jobId, JobStatus(nibble));
    }

    /// @dev All checks of a verification, in this order: status, caller, phase, deadline, cycle, lengths, then
    /// the draft and the reveal against the commitment. Returns job slot 0, slot 1 with the job's salt in place of
    /// the verifier (bits 63..0; the other fields where JobSlot reads them) and the draft root.
    function _checkVerification(
        uint256 jobId,
        Job storage job,
        uint32 cycle,
        uint32[] calldata tokens,
        uint64[] calldata q,
        uint256 pLength,
        bytes32 reveal
    ) private view returns (uint256 head, uint256 info, bytes32 root) {
        head = _runningSlot0(jobId, job);
        assembly ("memory-safe") {
            info := sload(add(job.slot, 1))
        }
        {
            address verifier = JobSlot.verifier(info);
            if (msg.sender != verifier) revert NotJobVerifier(msg.sender);
        }
        uint256 commitment = uint256(job.commitment);
        if (commitment & _PHASE_BIT == 0) revert WrongPhase(jobId, Phase.AwaitDraft);
        {
            uint256 deadline = JobSlot.deadline(head) + verifyTimeout;
            if (block.timestamp > deadline) revert DeadlinePassed(deadline);
            uint256 expected = JobSlot.cycle(head);
            if (cycle != expected) revert WrongCycle(expected, cycle);
        }
        {
            uint256 gamma = JobSlot.gamma(head);
            _checkLengths(gamma, tokens.length, q.length, pLength);
        }
        root = SpecMath.draftRootCalldata(jobId, cycle, tokens, q);
        // keccak256(root, high bits of the previous reveal), and the previous reveal is H(reveal) for an honest chain
        bytes32 last = bytes32(uint256(SpecMath.chainHash(reveal)) & _HIGH_BITS);
        uint256 expected = uint256(Hashes.efficientKeccak256(root, last));
        if ((expected ^ commitment) & _HIGH_BITS != 0) revert CommitmentMismatch();
        // the verifier's field is not needed any more: it carries the salt to the accept walk and the next word
        info = (info & ~uint256(type(uint160).max)) | ((commitment & _SALT_BITS) >> _SALT_AT);
    }

    /// @dev Token ranges of a verification: outToken below the job's vocabulary (else {TokenOutOfRange} with
    /// index γ), and the accept count `accepted` cut at the first proposal at or above it (probability 0 under
    /// the target, so it is rejected whatever p says).
    function _capAtVocab(uint32[] calldata tokens, uint256 accepted, uint256 info, uint32 outToken)
        private
        pure
        returns (uint256)
    {
        uint256 vocab = JobSlot.vocabSize(info);
        if (outToken >= vocab) revert TokenOutOfRange(tokens.length, outToken);
        assembly ("memory-safe") {
            // accepted ≤ γ = tokens.length (checked); each word is the raw calldata word (above uint32: out)
            for { let i := 0 } lt(i, accepted) { i := add(i, 1) } {
                if iszero(lt(calldataload(add(tokens.offset, shl(5, i))), vocab)) {
                    accepted := i
                    break
                }
            }
        }
        return accepted;
    }

    /// @dev The vocabulary both parties registered for the job's models (docs/protocol.md §4, "Token ranges").
    function _jobVocab(address drafter, bytes32 draftModel, address verifier, bytes32 targetModel)
        private
        view
        returns (uint256 vocab)
    {
        vocab = registry.vocabSizeOf(drafter, draftModel);
        uint256 targetVocab = registry.vocabSizeOf(verifier, targetModel);
        if (vocab != targetVocab) revert VocabMismatch(vocab, targetVocab);
    }

    function _checkLengths(uint256 gamma, uint256 tokens, uint256 q, uint256 p) private pure {
        if (tokens != gamma) revert GammaLengthMismatch(gamma, tokens);
        if (q != gamma) revert GammaLengthMismatch(gamma, q);
        if (p != gamma) revert GammaLengthMismatch(gamma, p);
    }

    /// @dev Range-checks the raw calldata words (token ≤ uint32 max, q a draft probability by
    /// SpecMath.isDraftProbability; the first bad proposal reverts, its token first) and packs the proposals
    /// 12 bytes each (token ‖ q, big-endian) for the DraftCommitted event.
    function _packDraft(uint32[] calldata tokens, uint64[] calldata q) private pure returns (bytes memory packed) {
        uint256 k = tokens.length;
        assembly ("memory-safe") {
            // Each entry is written with a 32-byte store, so allocate 20 bytes of room after the last one.
            packed := mload(0x40)
            mstore(packed, mul(k, 12))
            mstore(0x40, add(packed, and(add(mul(k, 12), 0x53), not(0x1f)))) // 0x20 + 12k + 20, rounded up
        }
        for (uint256 i; i < k; ++i) {
            (uint256 token, uint256 qi) = SpecMath.draftWordsAt(tokens, q, i);
            if (token > type(uint32).max) revert TokenOutOfRange(i, token);
            if (!SpecMath.isDraftProbability(qi)) SpecMath.revertDraftProbability(i, qi);
            assembly ("memory-safe") {
                mstore(add(add(packed, 0x20), mul(i, 12)), or(shl(224, token), shl(160, qi)))
            }
        }
    }

    /// @dev Stores the cycle's record hash (CycleRecord) in a new slot.
    function _storeRecord(
        uint256 jobId,
        uint256 cycle,
        bytes32 root,
        uint64[] calldata p,
        uint256 accepted,
        uint32 outToken
    ) private {
        _records[jobId][cycle] = CycleRecord.hashCalldata(root, p, uint32(accepted), outToken);
    }

    /// @dev Emits the cycle's output and writes slot 0 (next cycle, or Finished) and the new reveal.
    /// (Parameters in stack order, so that submitVerification can pass them without going too deep.)
    function _advance(
        uint256 jobId,
        uint32[] calldata tokens,
        bytes32 reveal,
        uint32 outToken,
        Job storage job,
        uint256 head,
        uint256 info,
        uint256 accepted
    ) private {
        (uint256 count, bool finished) = _emitOutput(jobId, head, info, tokens, accepted, outToken, reveal);
        uint256 next = _nextSlot0(head, count, accepted, tokens.length, finished);
        assembly ("memory-safe") {
            sstore(job.slot, next)
        }
        // phase: AwaitDraft, the salt (from `info`, see submitVerification) kept
        job.commitment = bytes32((uint256(reveal) & _HIGH_BITS) | (uint256(uint64(info)) << _SALT_AT));
        if (finished) {
            _releaseCapacity(JobSlot.drafter(head));
            emit JobFinished(jobId, FinishReason.Completed, address(0), 0); // α: at finalize
        }
    }

    /// @dev Slot 0 after a verified cycle that emitted `count` tokens.
    function _nextSlot0(uint256 head, uint256 count, uint256 accepted, uint256 gamma, bool finished)
        private
        view
        returns (uint256 next)
    {
        uint256 state = JobSlot.state(head);
        uint256 deadline = block.timestamp + commitTimeout;
        uint256 rejection = accepted < gamma ? 1 : 0;
        if (finished) {
            state = (state & ~uint256(_STATUS_MASK)) | uint8(JobStatus.Finished) | (count <= accepted ? _OUT_CUT : 0);
            deadline = block.timestamp + challengeWindow;
            // cut before the outToken: the rejection (if any) lies after the cut and is not counted for α
            if (count <= accepted) rejection = 0;
        }
        next = JobSlot.nextCycle(head, state, count, rejection, deadline);
    }

    /// @dev Emits CycleVerified with the cycle's output packed 4 bytes per token: the first `accepted`
    /// proposals then outToken, cut after EOS or when maxTokens tokens are out. The event data is
    /// ABI-encoded in place (head words, then the bytes) to avoid a copy.
    function _emitOutput(
        uint256 jobId,
        uint256 head,
        uint256 info,
        uint32[] calldata tokens,
        uint256 accepted,
        uint256 outToken,
        bytes32 reveal
    ) private returns (uint256 count, bool finished) {
        uint256 room;
        unchecked {
            // a running job has emitted < maxTokens tokens (it finishes when it reaches them); accepted ≤ γ
            uint256 maxTokens = JobSlot.maxTokens(info);
            uint256 emitted = JobSlot.emitted(head);
            room = maxTokens - emitted;
            count = accepted + 1;
        }
        uint256 eos = JobSlot.eosToken(info);
        if (count >= room) {
            count = room;
            finished = true;
        }
        bytes32 topic = CycleVerified.selector;
        uint256 cycle = JobSlot.cycle(head);
        assembly ("memory-safe") {
            let buf := mload(0x40)
            let out := add(buf, 0xc0) // after cycle, reveal, accepted, outToken, offset, length
            for { let i := 0 } lt(i, count) { i := add(i, 1) } {
                let token := outToken
                if lt(i, accepted) { token := calldataload(add(tokens.offset, shl(5, i))) }
                mstore(add(out, shl(2, i)), shl(224, token)) // also zeroes the padding after it
                if eq(token, eos) {
                    count := add(i, 1)
                    finished := 1
                    break
                }
            }
            mstore(buf, cycle)
            mstore(add(buf, 0x20), reveal)
            mstore(add(buf, 0x40), accepted)
            mstore(add(buf, 0x60), outToken)
            mstore(add(buf, 0x80), 0xa0)
            mstore(add(buf, 0xa0), shl(2, count))
            log2(buf, add(0xc0, shl(5, shr(5, add(shl(2, count), 31)))), topic, jobId)
        }
    }

    /// @dev Stops a running (or open) job: Finished, challenge window from now (its α counts wait for finalize); the
    /// drafter's capacity it held is free.
    function _stop(Job storage job) private {
        _setStatus(job, JobStatus.Finished);
        job.deadline = uint32(block.timestamp + challengeWindow);
        _releaseCapacity(job.drafter);
    }

    /// @dev One more live job for `drafter`, or {DrafterAtCapacity}; a job paying `price` per accepted token below
    /// the drafter's declared min price takes no slot ({PriceBelowDrafterMinimum}).
    /// @dev A probe counts but is never refused: a drafter keeping itself at capacity with self-dealt jobs, or
    /// pricing itself above the probe price, must not dodge its probes.
    function _takeCapacity(address drafter, bool probe, uint256 price) private {
        if (!probe && price < minPriceOf[drafter]) revert PriceBelowDrafterMinimum(drafter, price, minPriceOf[drafter]);
        DrafterLoad storage load = _loads[drafter];
        uint256 live = load.live;
        uint256 capacity = load.capacity == 0 ? DEFAULT_CAPACITY : load.capacity;
        if (live >= capacity && !probe) revert DrafterAtCapacity(drafter, capacity);
        load.live = uint32(live + 1);
    }

    /// @dev A job of `drafter` stopped being Open or Running (every such job leaves those statuses exactly once: to
    /// Finished, through `_stop`, the finishing cycle or `transcriptFinish`).
    function _releaseCapacity(address drafter) private {
        --_loads[drafter].live;
    }

    /// @dev Feeds a settled job's `cycles` into its drafter's α window; on a breach slashes
    /// `alphaSlashAmount(stake)`, credited to the treasury.
    function _recordAlpha(uint256 jobId, address drafter, uint256 cycles, uint256 accepted, uint256 rejected)
        private
    {
        if (_recordCycles(drafter, cycles, accepted, rejected)) {
            uint256 stake = registry.stakeOf(drafter);
            // Probes leave nobody a choice that steers the window, so the slash bites: alphaSlashBps of the stake.
            // Without probes the window counts requester traffic and the slash stays capped (alphaSlashAmount).
            uint256 amount = probeScheduler != address(0) ? stake * alphaSlashBps / 10_000 : alphaSlashAmount(stake);
            // slither-disable-next-line reentrancy-benign,reentrancy-events (the protocol's registry paying a slash in)
            uint256 taken = registry.slash(drafter, amount);
            owed[treasury] += taken;
            emit AlphaSlashed(jobId, drafter, taken);
        }
    }

    /// @dev Adds a regular job's α to `drafter`'s published statistic.
    function _observeAlpha(uint256 jobId, address drafter, uint256 cycles, uint256 accepted, uint256 rejected) private {
        DrafterLoad storage load = _loads[drafter];
        load.observedCycles += uint64(cycles);
        load.observedAccepted += uint64(accepted);
        load.observedRejected += uint64(rejected);
        emit AlphaObserved(jobId, drafter, cycles, accepted, rejected);
    }

    /// @dev Reverts when the treasury would be a party of a job (the requester is the caller).
    function _checkNotTreasury(address drafter, address verifier) private view {
        address t = treasury;
        // the probe scheduler, the treasury of a probing deployment, requests probes (it chooses nothing: a seed does)
        if ((msg.sender == t && t != probeScheduler) || drafter == t || verifier == t) revert TreasuryIsParty(t);
    }

    function _drafterTokens(Job storage job) private view returns (uint256) {
        // Every verified cycle emits its accepted proposals then outToken; only the last one can be cut.
        return uint256(job.emitted) + (job.state & _OUT_CUT != 0 ? 1 : 0) - job.cycle;
    }

    /// @dev Pays the job out (`_payOut`) and, when its cycles count (α-eligible, nobody convicted, no verifier
    /// timeout: the flag is cleared on those), records them in the drafter's α window; unlocks the stakes.
    function _settle(uint256 jobId, Job storage job) private {
        uint256 head;
        assembly ("memory-safe") {
            head := sload(job.slot)
        }
        (uint256 tokens, bool counts) = _payOut(jobId, job, head);
        address drafter = JobSlot.drafter(head);
        if (counts) {
            // The accepted proposals emitted; a last cycle cut by EOS / maxTokens counts only its emitted ones
            // (and its rejection only when the outToken was emitted: _nextSlot0), an unbiased truncation. Once a
            // probe scheduler is wired only a probe (prompt and verifier drawn from a seed, nobody's choice) moves
            // the window, and any other job's α is a published statistic; before, every counted job moves it (v1.1).
            address probes = probeScheduler;
            if (probes == address(0) || job.requester == probes) {
                _recordAlpha(jobId, drafter, JobSlot.cycle(head), tokens, JobSlot.rejected(head));
            } else {
                _observeAlpha(jobId, drafter, JobSlot.cycle(head), tokens, JobSlot.rejected(head));
            }
        }
        registry.unlock(drafter);
        registry.unlock(job.verifier);
    }

    /// @dev Credits the drafter (accepted emitted tokens × price), the verifier (passes × price, less the α fee
    /// when the job's cycles count), the treasury (the α fee) and the requester (the rest); marks it Finalized.
    /// Returns the drafter's accepted emitted tokens and whether the job's cycles count toward α.
    function _payOut(uint256 jobId, Job storage job, uint256 head) private returns (uint256 tokens, bool counts) {
        uint256 state = JobSlot.state(head);
        uint256 cycles = JobSlot.cycle(head);
        tokens = _drafterTokens(job);
        uint256 drafterPay = state & _DRAFTER_FORFEIT != 0 ? 0 : tokens * job.pricePerAcceptedToken;
        uint256 verifierPay = state & _VERIFIER_FORFEIT != 0 ? 0 : cycles * job.pricePerPass;
        uint256 refund = job.escrow - drafterPay - verifierPay;
        // (the flag is clear once the verifier forfeited, so the fee comes out of a pay it still has)
        counts = state & _ELIGIBLE != 0 && cycles != 0;
        uint256 fee = counts ? verifierPay * alphaFeeBps / 10_000 : 0;
        verifierPay -= fee;
        _setStatus(job, JobStatus.Finalized);
        owed[JobSlot.drafter(head)] += drafterPay;
        owed[job.verifier] += verifierPay;
        owed[job.requester] += refund;
        emit JobFinalized(jobId, drafterPay, verifierPay, refund);
        if (fee != 0) {
            address t = treasury;
            owed[t] += fee;
            emit AlphaFeePaid(jobId, t, fee);
        }
    }
}
