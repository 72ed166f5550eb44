// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IProbeScheduler
/// @notice Probes: the only jobs whose cycles move a drafter's α window (docs/protocol.md "Soundness (v1.2)").
/// A probe is due per drafter on a schedule that anyone may trigger (a keeper tip from the treasury); its prompt
/// (from a corpus committed per target model at deployment) and its verifier (weighted by verifier stake) are drawn
/// from the hash of the block that opened it, so neither the drafter, nor a requester, nor a verifier chooses them.
/// The scheduler is the treasury: it holds the α fees and slashes and pays probes at the price floor.
interface IProbeScheduler {
    /// @notice Where a probe stands.
    enum ProbeStatus {
        None,
        Seeding, // opened (or sent back by a verifier's abort): waits for its seed block's hash
        Running, // its job was submitted to the market
        Done // its job ended (any way but a verifier's timeout)
    }

    /// @notice One probe.
    struct Probe {
        address drafter;
        uint64 seedBlock; // the block whose hash draws the prompt and the verifier
        ProbeStatus status;
        uint32 attempts; // verifiers' aborts so far (each draws anew)
        address excluded; // the verifier whose abort sent it back (never drawn again for it)
        uint256 jobId; // the market job of the current attempt (0 while Seeding)
    }

    /// @notice A target model's probe corpus: a Merkle root over (index, keccak256(prompt)) leaves, its size and
    /// the target's end-of-sequence token.
    struct Corpus {
        bytes32 root;
        uint32 size;
        uint32 eosToken;
    }

    /// @notice The deployer set the probe corpus of `targetModel` (before wiring; fixed for good after).
    event CorpusSet(bytes32 indexed targetModel, bytes32 root, uint256 size, uint256 eosToken);
    /// @notice The scheduler was wired to its market.
    event ProbeMarketSet(address indexed market);
    /// @notice `keeper` opened probe `probeId` of `drafter`, seeded by the hash of `seedBlock`; the drafter's next
    /// probe is due at `nextDue`.
    event ProbeOpened(
        uint256 indexed probeId, address indexed drafter, address indexed keeper, uint64 seedBlock, uint64 nextDue
    );
    /// @notice The seed block's hash had left the 256-block window (or no verifier was eligible): a fresh seed.
    event ProbeReseeded(uint256 indexed probeId, uint64 seedBlock);
    /// @notice Probe `probeId` runs as market job `jobId` with the drawn `verifier` on corpus prompt `promptIndex`.
    event ProbeStarted(uint256 indexed probeId, uint256 indexed jobId, address indexed verifier, uint256 promptIndex);
    /// @notice The verifier of probe `probeId` let its job time out (slash burnt); another one will be drawn.
    event ProbeRedrawn(uint256 indexed probeId, address indexed abortedVerifier, uint64 seedBlock);
    /// @notice `keeper` earned `amount` wei for opening a probe.
    event KeeperTipped(uint256 indexed probeId, address indexed keeper, uint256 amount);
    /// @notice `account` withdrew `amount` wei of tips.
    event TipWithdrawn(address indexed account, uint256 amount);

    /// @notice Only the deployer may do this.
    error ProbeNotDeployer(address caller);
    /// @notice The scheduler is already wired (corpora are fixed).
    error ProbeAlreadyWired();
    /// @notice The scheduler is not wired to a market yet.
    error ProbeNotWired();
    /// @notice Only the market may call this.
    error ProbeOnlyMarket(address caller);
    /// @notice A parameter is out of range.
    error BadProbeParam(string name, uint256 value);
    /// @notice `drafter` is not an active drafter.
    error ProbeDrafterNotActive(address drafter);
    /// @notice No probe corpus for `targetModel`.
    error NoCorpus(bytes32 targetModel);
    /// @notice `drafter`'s next probe is due at `due`.
    error ProbeNotDue(address drafter, uint256 due);
    /// @notice `drafter` has a probe that has not ended (`probeId`).
    error ProbePending(address drafter, uint256 probeId);
    /// @notice The probe is not waiting for its draw.
    error ProbeWrongStatus(uint256 probeId, ProbeStatus status);
    /// @notice The seed block has not been mined yet (its hash is unknown until the next block).
    error ProbeSeedPending(uint256 seedBlock);
    /// @notice The revealed prompt is not the corpus prompt at `promptIndex`.
    error BadProbePrompt(uint256 promptIndex);
    /// @notice The treasury holds `balance`, less than the probe's escrow `needed`.
    error TreasuryShort(uint256 balance, uint256 needed);
    /// @notice The caller has no tips to withdraw.
    error NoTips();
    /// @notice A transfer failed.
    error ProbeTransferFailed();

    /// @notice Opens a probe of `drafter` when one is due (its previous probe ended and `probeInterval` has passed
    /// since it was opened); the caller earns `keeperTip` when the treasury holds it. The prompt and the verifier are
    /// drawn from the hash of this transaction's block (`startProbe`).
    /// @return probeId The new probe.
    function openProbe(address drafter) external returns (uint256 probeId);

    /// @notice Draws probe `probeId`'s prompt index and verifier from its seed block's hash and submits its job to
    /// the market, paid at the price floor from the treasury. Anyone may call it with the corpus prompt at the drawn
    /// index and its Merkle proof (`promptIndexOf` tells the index once the seed block is mined). Returns the job id,
    /// or 0 when the seed had to be renewed (its hash was gone, or no verifier was eligible).
    function startProbe(uint256 probeId, bytes calldata prompt, bytes32[] calldata proof) external returns (uint256);

    /// @notice The market's hook: the verifier of probe job `jobId` timed out (its slash is burnt); the probe waits
    /// for a fresh seed and draws another verifier (never `verifier` again).
    function probeAborted(uint256 jobId, address verifier) external;

    /// @notice Pulls the treasury's balance owed by the market (α fees and slashes, probe refunds) in.
    function collect() external;

    /// @notice Pays out the caller's keeper tips.
    function withdrawTips() external;

    /// @notice The corpus prompt index probe `probeId` draws (its seed block must be mined and within 256 blocks).
    function promptIndexOf(uint256 probeId) external view returns (uint256);

    /// @notice Probe `probeId`.
    function getProbe(uint256 probeId) external view returns (Probe memory);

    /// @notice The probe corpus of `targetModel`.
    function corpusOf(bytes32 targetModel) external view returns (Corpus memory);
}
