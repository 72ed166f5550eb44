// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IStakingRegistry
/// @notice The staking registry's events and errors, and what the protocol's other contracts (market, α window,
/// disputes) call on it.
interface IStakingRegistry {
    enum Role {
        None,
        Drafter,
        Verifier,
        Referee
    }

    /// @notice The deployer wired the market and the dispute manager.
    event ProtocolContractsSet(address indexed market, address indexed disputes);
    /// @notice `account` registered as `role` with `stake` wei, serving `modelIds`.
    event Registered(address indexed account, Role indexed role, uint256 stake, bytes32[] modelIds);
    /// @notice Drafter `account` drafts with `draftModel` for `targetModel`.
    event DrafterPairSet(address indexed account, bytes32 indexed draftModel, bytes32 indexed targetModel);
    /// @notice `account` serves `modelId` with vocabulary size `vocabSize` (every token id is below it).
    event VocabSizeSet(address indexed account, bytes32 indexed modelId, uint256 vocabSize);
    /// @notice Drafter `account` claims acceptance rate `alphaStar` (WAD).
    event AlphaStarSet(address indexed account, uint64 alphaStar);
    /// @notice `account` added `amount` wei; its stake is now `stake`.
    event StakeAdded(address indexed account, uint256 amount, uint256 stake);
    /// @notice `account` started unbonding; it can withdraw from `withdrawableAt` if no obligation is open.
    event UnbondRequested(address indexed account, uint256 withdrawableAt);
    /// @notice `account` withdrew `amount` wei and is no longer registered.
    event Unbonded(address indexed account, uint256 amount);
    /// @notice Protocol contract `by` opened an obligation on `account`, which now has `locks` open.
    event Locked(address indexed account, address indexed by, uint256 locks);
    /// @notice Protocol contract `by` closed an obligation on `account`, which now has `locks` open.
    event Unlocked(address indexed account, address indexed by, uint256 locks);
    /// @notice Protocol contract `by` took `amount` wei of `account`'s stake.
    event Slashed(address indexed account, address indexed by, uint256 amount);

    /// @notice Verifier `account` serves its transcript-mode link at `endpoint` (a URL; empty: none).
    event EndpointSet(address indexed account, string endpoint);

    /// @notice Referee `account`'s weight in the stake trees of its model ids is now `weight` (its active stake).
    event RefereeWeightSet(address indexed account, uint256 weight);

    /// @dev Only the deployer may wire the protocol contracts.
    error RegistryNotDeployer(address caller);
    /// @dev The protocol contracts are already wired.
    error RegistryAlreadyWired();
    /// @dev The protocol contracts are not wired yet.
    error NotWired();
    /// @dev The market address given to `setProtocolContracts` was zero.
    error RegistryZeroAddress();
    /// @dev The unbonding period does not outlast the challenge window (plus a dispute).
    error UnbondingTooShort(uint256 unbondingPeriod, uint256 challengeWindow);
    /// @dev The caller is not one of the protocol's own contracts.
    error NotProtocol(address caller);
    /// @dev `account` already holds a registration (one role per address).
    error AlreadyRegistered(address account);
    /// @dev `account` holds no registration.
    error NotRegistered(address account);
    /// @dev The role cannot be registered this way.
    error InvalidRole(Role role);
    /// @dev A verifier or referee must serve between 1 and MAX_MODELS model ids.
    error BadModelCount(uint256 count);
    /// @dev A vocabulary size outside 2..MAX_VOCAB (2^32 - 1).
    error BadVocabSize(uint256 vocabSize);
    /// @dev `register` got a different number of vocabulary sizes than model ids.
    error VocabCountMismatch(uint256 models, uint256 vocabSizes);
    /// @dev A model id was zero.
    error ZeroModel();
    /// @dev A model id appeared twice.
    error DuplicateModel(bytes32 modelId);
    /// @dev The stake would be below the role's minimum.
    error StakeBelowMinimum(uint256 stake, uint256 minimum);
    /// @dev No ETH was sent.
    error ZeroValue();
    /// @dev A claimed acceptance rate above WAD.
    error AlphaAboveWad(uint256 alphaStar);
    /// @dev The caller is not a registered drafter.
    error NotDrafter(address account);
    /// @dev The account is already unbonding.
    error AlreadyUnbonding(address account);
    /// @dev The account is not unbonding.
    error NotUnbonding(address account);
    /// @dev The unbonding period has not passed; it does at `withdrawableAt`.
    error UnbondingNotElapsed(uint256 withdrawableAt);
    /// @dev The stake is locked by `locks` open jobs or disputes.
    error StakeLocked(uint256 locks);
    /// @dev `unlock` without a matching `lock`.
    error NotLocked(address account);
    /// @dev The caller is not a registered verifier.
    error NotVerifier(address account);
    /// @dev An endpoint longer than MAX_ENDPOINT bytes.
    error EndpointTooLong(uint256 length, uint256 maximum);
    /// @dev Sending ETH (an unbonded stake, or slash proceeds to a protocol contract) failed.
    error RegistryTransferFailed();

    /// @notice True when `account` is registered as `role`, serves `modelId`, holds at least the role's
    /// minimum stake and is not unbonding.
    function isActive(address account, Role role, bytes32 modelId) external view returns (bool);

    /// @notice True when `account` is an active drafter of `draftModel` for `targetModel`.
    function isActiveDrafter(address account, bytes32 draftModel, bytes32 targetModel) external view returns (bool);

    /// @notice `isActive`, and registered in block `atBlock` or earlier: the referee draw counts only stakers
    /// who registered before its seed could be known.
    function isActiveSince(address account, Role role, bytes32 modelId, uint256 atBlock) external view returns (bool);

    /// @notice The vocabulary size `account` registered for `modelId`; 0 when it does not serve `modelId`.
    function vocabSizeOf(address account, bytes32 modelId) external view returns (uint256);

    /// @notice Current stake of `account` (wei), slashes already deducted.
    function stakeOf(address account) external view returns (uint256);

    /// @notice The role `account` registered in (None when not registered); the market reads it for drafters'
    /// capacities (v1.2).
    function roleOf(address account) external view returns (Role);

    /// @notice A registered drafter's draft and target model ids (zeros for any other account); the probe scheduler
    /// reads them to build a probe.
    function drafterPairOf(address drafter) external view returns (bytes32 draftModel, bytes32 targetModel);

    /// @notice Adds one open obligation (job or dispute) to `account`; while any is open its stake cannot leave.
    /// @dev Only the protocol's own contracts.
    function lock(address account) external;

    /// @notice Removes one open obligation from `account`.
    /// @dev Only the protocol's own contracts.
    function unlock(address account) external;

    /// @notice Takes up to `amount` of `account`'s stake and sends it to the calling protocol contract,
    /// which credits the beneficiaries. Returns the amount actually taken (capped at the stake).
    /// @dev Only the protocol's own contracts. Must work also while the account is unbonding.
    function slash(address account, uint256 amount) external returns (uint256 taken);

    /// @notice Number of referees registered for `modelId` (active or not); with {refereeAt} it lets the
    /// dispute manager draw referees without an unbounded loop.
    function refereeCount(bytes32 modelId) external view returns (uint256);

    /// @notice The `index`-th referee registered for `modelId`.
    function refereeAt(bytes32 modelId, uint256 index) external view returns (address);

    /// @notice Total active referee stake for `modelId` (wei): the sum of its stake tree.
    function refereeStakeTotal(bytes32 modelId) external view returns (uint256);

    /// @notice The referee whose stake holds point `point` (0 ≤ point < refereeStakeTotal) of the cumulative active
    /// stake for `modelId`: a uniform point draws each referee with probability stake / total. O(log n).
    function refereeByStake(bytes32 modelId, uint256 point) external view returns (address);

    /// @notice {refereeStakeTotal} as the tree stood at the end of block `atBlock` (before the current block).
    function refereeStakeTotalAt(bytes32 modelId, uint256 atBlock) external view returns (uint256);

    /// @notice {refereeByStake} on the tree as it stood at the end of block `atBlock` (before the current block):
    /// the dispute manager draws on the tree of the block before the draw's seed block, which nothing done once the
    /// seed is known can change.
    function refereeByStakeAt(bytes32 modelId, uint256 point, uint256 atBlock) external view returns (address);

    /// @notice The active verifier stake of `modelId` (a target model) as it stood at the end of block `atBlock`
    /// (before the current block): the tree a probe draws its verifier from (docs/protocol.md "Soundness (v1.2)").
    function verifierStakeTotalAt(bytes32 modelId, uint256 atBlock) external view returns (uint256);

    /// @notice The verifier of `modelId` whose stake held point `point` at the end of block `atBlock`.
    function verifierByStakeAt(bytes32 modelId, uint256 point, uint256 atBlock) external view returns (address);

    /// @notice `referee`'s weight in the stake trees (its stake while an active referee or verifier, else 0).
    function refereeWeight(address referee) external view returns (uint256);

    /// @notice The block in which the stake tree of `modelId` last changed (informational: draws read the tree as of
    /// the block before their seed, {refereeByStakeAt}, so a later change does not move them).
    function stakeTreeChangedAt(bytes32 modelId) external view returns (uint256);
}
