// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {IInferenceMarket} from "./interfaces/IInferenceMarket.sol";
import {IProbeScheduler} from "./interfaces/IProbeScheduler.sol";
import {IStakingRegistry} from "./interfaces/IStakingRegistry.sol";

/// @title ProbeScheduler
/// @notice The α window's only source (docs/protocol.md "Soundness (v1.2)"): v1.1 measured α on requester traffic,
/// so whoever chose a job's prompt, its verifier or whether it finished steered an honest drafter's window (a
/// verifier's selective abort, adversarial prompts, self-dealt padding). A probe's prompt comes from a corpus fixed
/// per target model at deployment, and its prompt and verifier are drawn from the hash of the block that opened it,
/// which nobody knew when they made their last choice; its schedule is per drafter and anyone may trigger it.
/// The scheduler is the deployment's treasury: α fees and slashes come in, probes and keeper tips go out.
///
/// Life of a probe: `openProbe(drafter)` when due (keeper tip) → `startProbe(id, prompt, proof)` from the next
/// block on: the prompt at the drawn index (checked against the corpus root), a verifier drawn ∝ stake from the
/// verifier tree of the block before the seed block, submitted to the market as a reference-settings job paid at
/// `probePrice` → the nodes serve it like any job → the market records its cycles in the window at settlement
/// (a drafter's timeout at α = 0), or on a verifier's timeout calls `probeAborted` and the probe draws again.
contract ProbeScheduler is IProbeScheduler, ReentrancyGuard {
    uint256 private constant _WAD = 1e18;
    /// @notice A verifier draw makes at most this many tries.
    uint256 public constant VERIFIER_TRIES = 16;

    /// @notice The staking registry (drafters, the verifier stake trees).
    IStakingRegistry public immutable registry;
    /// @notice Who may set corpora and wire the scheduler, once.
    address public immutable deployer;
    /// @notice Seconds from one probe of a drafter to the next.
    uint256 public immutable probeInterval;
    /// @notice Tokens a probe generates (its maxTokens).
    uint16 public immutable probeTokens;
    /// @notice Proposals per cycle of a probe (the deployment's γ for probes; α per proposal does not depend on it).
    uint8 public immutable probeGamma;
    /// @notice Wei per pass and per accepted token a probe pays (at least the market's α price floor).
    uint128 public immutable probePrice;
    /// @notice Wei the keeper that opens a due probe earns.
    uint256 public immutable keeperTip;

    /// @notice The market the probes run in (wired once).
    IInferenceMarket public market;
    /// @notice Probes opened so far (ids 1..probeCount).
    uint256 public probeCount;
    /// @notice Keeper tips owed.
    mapping(address account => uint256) public tips;
    /// @notice The latest probe of each drafter.
    mapping(address drafter => uint256) public lastProbeOf;
    /// @notice When each drafter's next probe is due.
    mapping(address drafter => uint256) public nextDueOf;
    /// @notice The probe a market job belongs to.
    mapping(uint256 jobId => uint256) public probeOfJob;

    mapping(bytes32 targetModel => Corpus) private _corpora;
    mapping(uint256 probeId => Probe) private _probes;

    /// @param registry_ The staking registry.
    /// @param probeInterval_ Seconds between two probes of one drafter (> 0).
    /// @param probeTokens_ A probe's maxTokens (> 0).
    /// @param probeGamma_ A probe's γ (1..16).
    /// @param probePrice_ Wei per pass and per accepted token of a probe.
    /// @param keeperTip_ Wei per opened probe to its keeper.
    constructor(
        address registry_,
        uint256 probeInterval_,
        uint16 probeTokens_,
        uint8 probeGamma_,
        uint128 probePrice_,
        uint256 keeperTip_
    ) {
        if (registry_ == address(0)) revert BadProbeParam("registry", 0);
        if (probeInterval_ == 0 || probeInterval_ > 365 days) revert BadProbeParam("probeInterval", probeInterval_);
        if (probeTokens_ == 0) revert BadProbeParam("probeTokens", probeTokens_);
        if (probeGamma_ == 0 || probeGamma_ > 16) revert BadProbeParam("probeGamma", probeGamma_);
        registry = IStakingRegistry(registry_);
        deployer = msg.sender;
        probeInterval = probeInterval_;
        probeTokens = probeTokens_;
        probeGamma = probeGamma_;
        probePrice = probePrice_;
        keeperTip = keeperTip_;
    }

    /// @notice Takes α fees, slashes and refunds from the market, and funding from anyone.
    receive() external payable {}

    // ------------------------------------------------------------------ deployment

    /// @notice Sets the probe corpus of `targetModel` (deployer only, before `wire`; never a drafter's choice).
    /// @param targetModel The target model id.
    /// @param root Merkle root (OpenZeppelin MerkleProof, sorted pairs) over leaves
    /// keccak256(bytes.concat(keccak256(abi.encode(index, keccak256(prompt))))), index 0..size-1.
    /// @param size Prompts in the corpus (> 0).
    /// @param eosToken The target's end-of-sequence token.
    function setCorpus(bytes32 targetModel, bytes32 root, uint32 size, uint32 eosToken) external {
        if (msg.sender != deployer) revert ProbeNotDeployer(msg.sender);
        if (address(market) != address(0)) revert ProbeAlreadyWired();
        if (targetModel == bytes32(0) || root == bytes32(0) || size == 0) revert BadProbeParam("corpus", size);
        _corpora[targetModel] = Corpus(root, size, eosToken);
        emit CorpusSet(targetModel, root, size, eosToken);
    }

    /// @notice Wires the scheduler to `market_` (deployer only, once); corpora are fixed from then on.
    function wire(address market_) external {
        if (msg.sender != deployer) revert ProbeNotDeployer(msg.sender);
        if (address(market) != address(0)) revert ProbeAlreadyWired();
        if (market_ == address(0)) revert BadProbeParam("market", 0);
        market = IInferenceMarket(market_);
        emit ProbeMarketSet(market_);
    }

    // ------------------------------------------------------------------ probes

    /// @inheritdoc IProbeScheduler
    function openProbe(address drafter) external nonReentrant returns (uint256 probeId) {
        if (address(market) == address(0)) revert ProbeNotWired();
        (bytes32 draftModel, bytes32 targetModel) = registry.drafterPairOf(drafter);
        if (draftModel == bytes32(0) || !registry.isActiveDrafter(drafter, draftModel, targetModel)) {
            revert ProbeDrafterNotActive(drafter);
        }
        if (_corpora[targetModel].size == 0) revert NoCorpus(targetModel);
        uint256 due = nextDueOf[drafter];
        if (block.timestamp < due) revert ProbeNotDue(drafter, due);
        uint256 last = lastProbeOf[drafter];
        if (last != 0 && !_ended(_probes[last])) revert ProbePending(drafter, last);

        probeId = ++probeCount;
        uint64 nextDue = uint64(block.timestamp + probeInterval);
        nextDueOf[drafter] = nextDue;
        lastProbeOf[drafter] = probeId;
        Probe storage p = _probes[probeId];
        p.drafter = drafter;
        p.seedBlock = uint64(block.number);
        p.status = ProbeStatus.Seeding;
        emit ProbeOpened(probeId, drafter, msg.sender, uint64(block.number), nextDue);
        uint256 tip = keeperTip;
        if (tip != 0 && address(this).balance >= tip) {
            tips[msg.sender] += tip;
            emit KeeperTipped(probeId, msg.sender, tip);
        }
    }

    /// @inheritdoc IProbeScheduler
    function startProbe(uint256 probeId, bytes calldata prompt, bytes32[] calldata proof)
        external
        nonReentrant
        returns (uint256 jobId)
    {
        Probe storage p = _probes[probeId];
        if (p.status != ProbeStatus.Seeding) revert ProbeWrongStatus(probeId, p.status);
        if (block.number <= p.seedBlock) revert ProbeSeedPending(p.seedBlock);
        (uint256 index, address verifier) = _draw(probeId, p, prompt, proof);
        if (verifier == address(0)) {
            // the seed's hash is gone, or no verifier was eligible on that tree: a fresh seed (nobody's choice)
            p.seedBlock = uint64(block.number);
            emit ProbeReseeded(probeId, uint64(block.number));
            return 0;
        }
        p.status = ProbeStatus.Running;
        // slither-disable-next-line reentrancy-eth,reentrancy-benign (nonReentrant; the protocol's own market, which never calls back in submitJob)
        jobId = _submit(p.drafter, verifier, prompt);
        p.jobId = jobId;
        probeOfJob[jobId] = probeId;
        emit ProbeStarted(probeId, jobId, verifier, index);
    }

    /// @dev The prompt index and verifier of `p`'s current attempt (verifier 0: a fresh seed is needed); reverts
    /// when `prompt` is not the corpus prompt at the index.
    function _draw(uint256 probeId, Probe storage p, bytes calldata prompt, bytes32[] calldata proof)
        private
        view
        returns (uint256 index, address verifier)
    {
        bytes32 seedHash = blockhash(p.seedBlock);
        if (seedHash == bytes32(0)) return (0, address(0));
        // slither-disable-next-line unused-return (the draft model is not needed here)
        (, bytes32 targetModel) = registry.drafterPairOf(p.drafter);
        Corpus storage corpus = _corpora[targetModel];
        uint256 seed = uint256(keccak256(abi.encode(seedHash, probeId, p.attempts)));
        // slither-disable-next-line weak-prng (a block hash fixed after every party's last choice: docs/protocol.md "Soundness (v1.2)")
        index = seed % corpus.size;
        if (!MerkleProof.verifyCalldata(proof, corpus.root, _leaf(index, prompt))) revert BadProbePrompt(index);
        verifier = _drawVerifier(targetModel, seed, p);
    }

    /// @dev Submits the probe job (reference settings, `probeTokens`, `probeGamma`, paid at `probePrice`).
    function _submit(address drafter, address verifier, bytes calldata prompt) private returns (uint256) {
        (bytes32 draftModel, bytes32 targetModel) = registry.drafterPairOf(drafter);
        uint256 price = probePrice;
        uint256 escrow = uint256(probeTokens) * 2 * price;
        if (address(this).balance < escrow) revert TreasuryShort(address(this).balance, escrow);
        IInferenceMarket.JobRequest memory request = IInferenceMarket.JobRequest({
            draftModel: draftModel,
            targetModel: targetModel,
            drafter: drafter,
            verifier: verifier,
            gamma: probeGamma,
            temperature: uint64(_WAD),
            topK: 0,
            topP: uint64(_WAD),
            maxTokens: probeTokens,
            eosToken: _corpora[targetModel].eosToken,
            pricePerAcceptedToken: uint128(price),
            pricePerPass: uint128(price)
        });
        // slither-disable-next-line reentrancy-no-eth,arbitrary-send-eth (nonReentrant; the protocol's own market)
        return market.submitJob{value: escrow}(request, prompt);
    }

    /// @inheritdoc IProbeScheduler
    function probeAborted(uint256 jobId, address verifier) external {
        if (msg.sender != address(market) || msg.sender == address(0)) revert ProbeOnlyMarket(msg.sender);
        uint256 probeId = probeOfJob[jobId];
        Probe storage p = _probes[probeId];
        if (probeId == 0 || p.jobId != jobId) return; // not the current attempt of a probe
        p.status = ProbeStatus.Seeding;
        p.excluded = verifier;
        p.attempts += 1;
        p.jobId = 0;
        p.seedBlock = uint64(block.number);
        emit ProbeRedrawn(probeId, verifier, uint64(block.number));
    }

    /// @inheritdoc IProbeScheduler
    function collect() external nonReentrant {
        market.withdraw();
    }

    /// @inheritdoc IProbeScheduler
    function withdrawTips() external nonReentrant {
        uint256 amount = tips[msg.sender];
        if (amount == 0) revert NoTips();
        tips[msg.sender] = 0;
        emit TipWithdrawn(msg.sender, amount);
        // slither-disable-next-line low-level-calls (pull payment of the caller's own tips, zeroed first)
        (bool ok,) = payable(msg.sender).call{value: amount}("");
        if (!ok) revert ProbeTransferFailed();
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IProbeScheduler
    function promptIndexOf(uint256 probeId) external view returns (uint256) {
        Probe storage p = _probes[probeId];
        bytes32 seedHash = blockhash(p.seedBlock);
        if (p.status != ProbeStatus.Seeding || seedHash == bytes32(0)) revert ProbeWrongStatus(probeId, p.status);
        // slither-disable-next-line unused-return (the draft model is not needed here)
        (, bytes32 targetModel) = registry.drafterPairOf(p.drafter);
        Corpus storage corpus = _corpora[targetModel];
        // slither-disable-next-line weak-prng (the same draw as startProbe's)
        return uint256(keccak256(abi.encode(seedHash, probeId, p.attempts))) % corpus.size;
    }

    /// @inheritdoc IProbeScheduler
    function getProbe(uint256 probeId) external view returns (Probe memory) {
        return _probes[probeId];
    }

    /// @inheritdoc IProbeScheduler
    function corpusOf(bytes32 targetModel) external view returns (Corpus memory) {
        return _corpora[targetModel];
    }

    // ------------------------------------------------------------------ internals

    /// @dev A probe has ended when its job left Open and Running (a verifier's timeout sends it back to Seeding first).
    function _ended(Probe storage p) private view returns (bool) {
        if (p.status != ProbeStatus.Running) return p.status == ProbeStatus.Done;
        IInferenceMarket.JobStatus status = market.jobStatus(p.jobId);
        return status == IInferenceMarket.JobStatus.Finished || status == IInferenceMarket.JobStatus.Finalized;
    }

    /// @dev The corpus leaf of prompt `index`.
    function _leaf(uint256 index, bytes calldata prompt) private pure returns (bytes32) {
        return keccak256(bytes.concat(keccak256(abi.encode(index, keccak256(prompt)))));
    }

    /// @dev A verifier of `targetModel` drawn ∝ its stake in the tree of the block before `p`'s seed block: active
    /// now, not the drafter and not the verifier whose abort sent `p` back; address(0) when the tries find none.
    function _drawVerifier(bytes32 targetModel, uint256 seed, Probe storage p) private view returns (address) {
        uint256 snapshot = p.seedBlock - 1;
        address drafter = p.drafter;
        address excluded = p.excluded;
        uint256 total = registry.verifierStakeTotalAt(targetModel, snapshot);
        if (total == 0) return address(0);
        for (uint256 j = 0; j < VERIFIER_TRIES; ++j) {
            // slither-disable-next-line weak-prng (the probe's seed: a block hash fixed after every party's last choice)
            uint256 point = uint256(keccak256(abi.encode(seed, j))) % total;
            // slither-disable-next-line calls-loop (the protocol's registry; ≤ VERIFIER_TRIES times)
            address candidate = registry.verifierByStakeAt(targetModel, point, snapshot);
            if (candidate == drafter || candidate == excluded) continue;
            // slither-disable-next-line calls-loop (the protocol's registry; ≤ VERIFIER_TRIES times)
            if (registry.isActive(candidate, IStakingRegistry.Role.Verifier, targetModel)) return candidate;
        }
        return address(0);
    }
}
