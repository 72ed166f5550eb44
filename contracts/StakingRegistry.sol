// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IStakingRegistry} from "./interfaces/IStakingRegistry.sol";
import {IAlphaWindow} from "./interfaces/IAlphaWindow.sol";
import {IInferenceMarket} from "./interfaces/IInferenceMarket.sol";
import {StakeTree} from "./lib/StakeTree.sol";

/// @title StakingRegistry
/// @notice Stakes, roles and served model ids of the protocol's operators (docs/protocol.md §2, §7).
/// One role per address: a drafter serves one (draft model, target model) pair and claims an
/// acceptance rate α*; a verifier serves target model ids; a referee serves the model ids it can replay.
/// Stake leaves only through `requestUnbond` + `withdrawUnbonded` after `unbondingPeriod`, and never
/// while its owner has open jobs or disputes (`lock` counters held by the protocol's own contracts).
/// Slashes are taken only by the protocol's own contracts (the market, which is also the α window,
/// and the dispute manager), wired once by the deployer; the slashed ETH goes to the calling contract.
contract StakingRegistry is IStakingRegistry, ReentrancyGuardTransient {
    using StakeTree for StakeTree.Tree;

    /// @notice Most model ids one verifier or referee may serve (bounds every loop over them).
    uint256 public constant MAX_MODELS = 8;
    uint256 internal constant WAD = 1e18;
    /// @notice Largest vocabulary size a model id can be registered with (token ids are uint32).
    uint256 public constant MAX_VOCAB = type(uint32).max;

    /// @notice Tag of the verifiers' stake trees (`_treeId`).
    bytes32 internal constant VERIFIER_TREE_TAG = keccak256("verispec.verifier-tree");
    /// @notice A referee stays in the draw pool down to minRefereeStake / REFEREE_FLOOR_DIVISOR of stake.
    uint256 public constant REFEREE_FLOOR_DIVISOR = 4;

    /// @notice Longest endpoint (bytes) a verifier may publish with `setEndpoint`.
    uint256 public constant MAX_ENDPOINT = 256;

    struct Account {
        uint128 stake; // wei, slashes deducted
        Role role;
        uint32 locks; // open jobs and disputes
        uint64 unbondingSince; // 0 = not unbonding
        uint64 alphaStar; // drafters only: claimed acceptance rate (WAD)
        bytes32 targetModel; // drafters only: the target model the draft model drafts for
    }

    /// @notice Minimum stake of a drafter (wei).
    uint256 public immutable minDrafterStake;
    /// @notice Minimum stake of a verifier (wei).
    uint256 public immutable minVerifierStake;
    /// @notice Minimum stake of a referee (wei).
    uint256 public immutable minRefereeStake;
    /// @notice Seconds between `requestUnbond` and `withdrawUnbonded`. Must exceed the market's challenge
    /// window plus a full dispute's duration (checked against the market at wiring, and by the deployer
    /// script against the dispute periods).
    uint256 public immutable unbondingPeriod;
    /// @notice The account that may wire the protocol contracts, once.
    address public immutable deployer;

    /// @notice The inference market (also the α window); zero until wired.
    address public market;
    /// @notice The dispute manager; zero until wired (or when deployed without one).
    address public disputes;

    mapping(address account => Account) private _accounts;
    mapping(address account => bytes32[]) private _models;
    mapping(address account => mapping(bytes32 modelId => bool)) private _serves;
    mapping(bytes32 modelId => address[]) private _referees;
    mapping(bytes32 modelId => mapping(address referee => uint256)) private _refereeIndexPlusOne;
    mapping(address account => uint256) private _registeredBlock;
    mapping(address account => mapping(bytes32 modelId => uint256)) private _vocab;
    // Referee draw weights (docs/disputes.md, "Referee draw"): per model id a sum tree over the referees' active
    // stake. A referee keeps its slot for good (re-registering reuses it), so the tree grows only with new accounts.
    mapping(bytes32 modelId => StakeTree.Tree) private _stakeTrees;
    mapping(bytes32 modelId => mapping(address referee => uint256)) private _treeSlot;
    mapping(bytes32 modelId => mapping(uint256 slot => address)) private _slotReferee;
    mapping(address referee => uint256) private _treeWeight; // the weight it holds in each of its models' trees
    mapping(bytes32 modelId => uint256) private _treeChangedAt; // block of the tree's last change
    mapping(address account => string) private _endpoints; // verifiers' transcript-mode link URLs

    modifier onlyProtocol() {
        if (msg.sender == address(0) || (msg.sender != market && msg.sender != disputes)) {
            revert NotProtocol(msg.sender);
        }
        _;
    }

    modifier whenWired() {
        if (market == address(0)) revert NotWired();
        _;
    }

    /// @param minDrafterStake_ Minimum stake of a drafter (wei).
    /// @param minVerifierStake_ Minimum stake of a verifier (wei).
    /// @param minRefereeStake_ Minimum stake of a referee (wei).
    /// @param unbondingPeriod_ Seconds from `requestUnbond` to `withdrawUnbonded`.
    constructor(uint256 minDrafterStake_, uint256 minVerifierStake_, uint256 minRefereeStake_, uint256 unbondingPeriod_) {
        minDrafterStake = minDrafterStake_;
        minVerifierStake = minVerifierStake_;
        minRefereeStake = minRefereeStake_;
        unbondingPeriod = unbondingPeriod_;
        deployer = msg.sender;
    }

    // ------------------------------------------------------------------ wiring

    /// @notice Wires the market (which is also the α window) and the dispute manager; callable once, by the deployer.
    /// @dev `disputes_` may be zero for a deployment without a dispute manager. Requires
    /// `unbondingPeriod > market.challengeWindow()`; the deployer checks the full relation
    /// (challenge window + answer + commit + reveal periods) before wiring.
    function setProtocolContracts(address market_, address disputes_) external {
        if (msg.sender != deployer) revert RegistryNotDeployer(msg.sender);
        if (market != address(0)) revert RegistryAlreadyWired();
        if (market_ == address(0)) revert RegistryZeroAddress();
        uint256 window = IInferenceMarket(market_).challengeWindow();
        if (unbondingPeriod <= window) revert UnbondingTooShort(unbondingPeriod, window);
        market = market_;
// slither-disable-next-line missing-zero-check (zero: a deployment without disputes)
        disputes = disputes_;
        emit ProtocolContractsSet(market_, disputes_);
    }

    // ------------------------------------------------------------------ registration

    /// @notice Registers the caller as a drafter of `draftModel` for `targetModel`, staking `msg.value`
    /// and claiming acceptance rate `alphaStar` (WAD); `vocabSize` is the draft model's vocabulary size
    /// (2..MAX_VOCAB), which a job's target vocabulary must equal. Keeps the address's α window
    /// (lowering α*: as setAlphaStar).
    function registerDrafter(bytes32 draftModel, bytes32 targetModel, uint64 alphaStar, uint256 vocabSize)
        external
        payable
        whenWired
    {
        if (draftModel == bytes32(0) || targetModel == bytes32(0)) revert ZeroModel();
        if (alphaStar > WAD) revert AlphaAboveWad(alphaStar);
        _register(Role.Drafter, minDrafterStake);
        _setVocab(draftModel, vocabSize);
        Account storage account = _accounts[msg.sender];
        account.alphaStar = alphaStar;
        account.targetModel = targetModel;
        _serves[msg.sender][draftModel] = true;
        _models[msg.sender].push(draftModel);
        bytes32[] memory served = new bytes32[](1);
        served[0] = draftModel;
        emit Registered(msg.sender, Role.Drafter, msg.value, served);
        emit DrafterPairSet(msg.sender, draftModel, targetModel);
        emit AlphaStarSet(msg.sender, alphaStar);
        IAlphaWindow(market).alphaClaimSet(msg.sender, alphaStar);
    }

    /// @notice Registers the caller as a verifier (target model ids) or referee (model ids it can replay),
    /// staking `msg.value`; `vocabSizes[i]` is the vocabulary size of `modelIds[i]` (2..MAX_VOCAB), recorded
    /// for the caller alone (nobody can set another account's vocabulary for a model id).
    function register(Role role, bytes32[] calldata modelIds, uint256[] calldata vocabSizes) external payable whenWired {
// slither-disable-next-line uninitialized-local (set on every branch that does not revert)
        uint256 minimum;
        if (role == Role.Verifier) minimum = minVerifierStake;
        else if (role == Role.Referee) minimum = minRefereeStake;
        else revert InvalidRole(role);
        uint256 count = modelIds.length;
        if (count == 0 || count > MAX_MODELS) revert BadModelCount(count);
        if (vocabSizes.length != count) revert VocabCountMismatch(count, vocabSizes.length);
        _register(role, minimum);
        for (uint256 i = 0; i < count; ++i) {
            bytes32 modelId = modelIds[i];
            if (modelId == bytes32(0)) revert ZeroModel();
            if (_serves[msg.sender][modelId]) revert DuplicateModel(modelId);
            _serves[msg.sender][modelId] = true;
            _models[msg.sender].push(modelId);
            _setVocab(modelId, vocabSizes[i]);
            if (role == Role.Referee) {
                _referees[modelId].push(msg.sender);
                _refereeIndexPlusOne[modelId][msg.sender] = _referees[modelId].length;
            }
            bytes32 treeId = _treeId(role, modelId);
            if (_treeSlot[treeId][msg.sender] == 0) {
                uint256 slot = _stakeTrees[treeId].push(0);
                _treeSlot[treeId][msg.sender] = slot;
                _slotReferee[treeId][slot] = msg.sender;
            }
        }
        emit Registered(msg.sender, role, msg.value, modelIds);
        _syncRefereeWeight(msg.sender);
    }

    /// @notice Adds `msg.value` to the caller's stake (not while unbonding).
    function addStake() external payable {
        Account storage account = _accounts[msg.sender];
        if (account.role == Role.None) revert NotRegistered(msg.sender);
        if (account.unbondingSince != 0) revert AlreadyUnbonding(msg.sender);
        if (msg.value == 0) revert ZeroValue();
        uint256 stake = account.stake + msg.value;
        account.stake = uint128(stake);
        emit StakeAdded(msg.sender, msg.value, stake);
        _syncRefereeWeight(msg.sender);
    }

    /// @notice Sets the caller's (a drafter's) claimed acceptance rate α* (WAD). Raising is always allowed;
    /// lowering reverts in the α window while the drafter's window holds any cycle.
    function setAlphaStar(uint64 alphaStar) external {
        Account storage account = _accounts[msg.sender];
        if (account.role != Role.Drafter) revert NotDrafter(msg.sender);
        if (alphaStar > WAD) revert AlphaAboveWad(alphaStar);
        account.alphaStar = alphaStar;
        emit AlphaStarSet(msg.sender, alphaStar);
        IAlphaWindow(market).alphaClaimSet(msg.sender, alphaStar);
    }

    /// @notice Publishes the caller's (a verifier's) transcript-mode link endpoint, a URL of at most MAX_ENDPOINT
    /// bytes (docs/protocol.md, "Transcript mode (v2)"); an empty string withdraws it. Kept across unbonding
    /// until `withdrawUnbonded` deletes the registration. The contract does not parse it: nodes validate what they read.
    /// @param endpoint The URL drafters and requesters connect to (e.g. ws://host:port).
    function setEndpoint(string calldata endpoint) external {
        if (_accounts[msg.sender].role != Role.Verifier) revert NotVerifier(msg.sender);
        uint256 length = bytes(endpoint).length;
        if (length > MAX_ENDPOINT) revert EndpointTooLong(length, MAX_ENDPOINT);
        _endpoints[msg.sender] = endpoint;
        emit EndpointSet(msg.sender, endpoint);
    }

    /// @notice Starts unbonding the caller's whole stake: the account stops being active at once (a referee
    /// also leaves the referee lists) and may withdraw after `unbondingPeriod` once no obligation is open.
    function requestUnbond() external {
        Account storage account = _accounts[msg.sender];
        if (account.role == Role.None) revert NotRegistered(msg.sender);
        if (account.unbondingSince != 0) revert AlreadyUnbonding(msg.sender);
        account.unbondingSince = uint64(block.timestamp);
        // slither-disable-next-line incorrect-equality (an enum, not a balance)
        if (account.role == Role.Referee) {
            bytes32[] storage models = _models[msg.sender];
            uint256 count = models.length; // <= MAX_MODELS
            for (uint256 i = 0; i < count; ++i) {
                _removeReferee(models[i], msg.sender);
            }
        }
        _syncRefereeWeight(msg.sender);
        emit UnbondRequested(msg.sender, block.timestamp + unbondingPeriod);
    }

    /// @notice Pays the caller's remaining stake out after the unbonding period, when no job or dispute
    /// holds it, and deletes the registration (the address may register again).
    function withdrawUnbonded() external nonReentrant {
        Account storage account = _accounts[msg.sender];
        uint256 since = account.unbondingSince;
        if (since == 0) revert NotUnbonding(msg.sender);
        if (block.timestamp < since + unbondingPeriod) revert UnbondingNotElapsed(since + unbondingPeriod);
        if (account.locks != 0) revert StakeLocked(account.locks);
        uint256 amount = account.stake;
        _setRefereeWeight(msg.sender, 0); // already 0 since requestUnbond; kept for the invariant
        bytes32[] storage models = _models[msg.sender];
        uint256 count = models.length; // <= MAX_MODELS
        for (uint256 i = 0; i < count; ++i) {
            delete _serves[msg.sender][models[i]];
        }
        delete _models[msg.sender];
        delete _accounts[msg.sender];
        delete _registeredBlock[msg.sender];
        delete _endpoints[msg.sender];
        emit Unbonded(msg.sender, amount);
        if (amount != 0) {
            // slither-disable-next-line low-level-calls (pays out the caller's own stake, deleted first; nonReentrant)
            (bool ok,) = payable(msg.sender).call{value: amount}("");
            if (!ok) revert RegistryTransferFailed();
        }
    }

    // ------------------------------------------------------------------ protocol hooks

    /// @inheritdoc IStakingRegistry
    function lock(address account) external onlyProtocol {
        uint256 locks = _accounts[account].locks + 1;
        _accounts[account].locks = uint32(locks);
        emit Locked(account, msg.sender, locks);
    }

    /// @inheritdoc IStakingRegistry
    function unlock(address account) external onlyProtocol {
        uint256 locks = _accounts[account].locks;
        if (locks == 0) revert NotLocked(account);
        _accounts[account].locks = uint32(locks - 1);
        emit Unlocked(account, msg.sender, locks - 1);
    }

    /// @inheritdoc IStakingRegistry
    function slash(address account, uint256 amount) external onlyProtocol nonReentrant returns (uint256 taken) {
        Account storage acct = _accounts[account];
        uint256 stake = acct.stake;
        taken = amount < stake ? amount : stake;
        if (taken == 0) return 0;
        acct.stake = uint128(stake - taken);
        emit Slashed(account, msg.sender, taken);
        _syncRefereeWeight(account);
        // slither-disable-next-line low-level-calls (slash proceeds to the calling protocol contract, stake cut first)
        (bool ok,) = payable(msg.sender).call{value: taken}("");
        if (!ok) revert RegistryTransferFailed();
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IStakingRegistry
    function isActive(address account, Role role, bytes32 modelId) public view returns (bool) {
        Account storage acct = _accounts[account];
        uint256 minimum = role == Role.Referee ? refereeFloor() : minStake(role);
        return role != Role.None && acct.role == role && acct.unbondingSince == 0 && _serves[account][modelId]
            && acct.stake >= minimum;
    }

    /// @inheritdoc IStakingRegistry
    function isActiveSince(address account, Role role, bytes32 modelId, uint256 atBlock) external view returns (bool) {
        return _registeredBlock[account] <= atBlock && isActive(account, role, modelId);
    }

    /// @notice The block in which `account` registered (0 when not registered).
    function registeredBlock(address account) external view returns (uint256) {
        return _registeredBlock[account];
    }

    /// @inheritdoc IStakingRegistry
    function isActiveDrafter(address account, bytes32 draftModel, bytes32 targetModel) external view returns (bool) {
        // slither-disable-next-line incorrect-equality (a model id, not a balance)
        return isActive(account, Role.Drafter, draftModel) && _accounts[account].targetModel == targetModel;
    }

    /// @inheritdoc IStakingRegistry
    function vocabSizeOf(address account, bytes32 modelId) external view returns (uint256) {
        return _serves[account][modelId] ? _vocab[account][modelId] : 0;
    }

    /// @notice The stake below which a referee leaves the draw pool: a quarter of the registration minimum, so that
    /// penalties lower a referee's weight long before they eject it (docs/disputes.md, "Referee draw").
    function refereeFloor() public view returns (uint256) {
        return minRefereeStake / REFEREE_FLOOR_DIVISOR;
    }

    /// @notice The minimum stake of `role` to register (0 for Role.None).
    function minStake(Role role) public view returns (uint256) {
        if (role == Role.Drafter) return minDrafterStake;
        if (role == Role.Verifier) return minVerifierStake;
        if (role == Role.Referee) return minRefereeStake;
        return 0;
    }

    /// @inheritdoc IStakingRegistry
    function stakeOf(address account) external view returns (uint256) {
        return _accounts[account].stake;
    }

    /// @notice The transcript-mode link endpoint verifier `account` published (empty when none).
    function endpointOf(address account) external view returns (string memory) {
        return _endpoints[account];
    }

    /// @inheritdoc IStakingRegistry
    function roleOf(address account) external view returns (Role) {
        return _accounts[account].role;
    }

    /// @inheritdoc IStakingRegistry
    function drafterPairOf(address drafter) external view returns (bytes32 draftModel, bytes32 targetModel) {
        Account storage account = _accounts[drafter];
        if (account.role != Role.Drafter) return (bytes32(0), bytes32(0));
        return (_models[drafter][0], account.targetModel);
    }

    /// @notice The whole registration of `account`.
    function accountOf(address account) external view returns (Account memory) {
        return _accounts[account];
    }

    /// @notice The model ids `account` serves (a drafter: its draft model).
    function modelsOf(address account) external view returns (bytes32[] memory) {
        return _models[account];
    }

    /// @notice True when `account` is registered for `modelId` (active or not).
    function serves(address account, bytes32 modelId) external view returns (bool) {
        return _serves[account][modelId];
    }

    /// @inheritdoc IStakingRegistry
    function refereeCount(bytes32 modelId) external view returns (uint256) {
        return _referees[modelId].length;
    }

    /// @inheritdoc IStakingRegistry
    function refereeAt(bytes32 modelId, uint256 index) external view returns (address) {
        return _referees[modelId][index];
    }

    /// @inheritdoc IStakingRegistry
    function refereeStakeTotal(bytes32 modelId) external view returns (uint256) {
        return _stakeTrees[modelId].totalWeight();
    }

    /// @inheritdoc IStakingRegistry
    function refereeStakeTotalAt(bytes32 modelId, uint256 atBlock) external view returns (uint256) {
        return _stakeTrees[modelId].totalWeightAt(atBlock);
    }

    /// @inheritdoc IStakingRegistry
    function refereeByStake(bytes32 modelId, uint256 point) external view returns (address) {
        return _slotReferee[modelId][_stakeTrees[modelId].find(point)];
    }

    /// @inheritdoc IStakingRegistry
    function refereeByStakeAt(bytes32 modelId, uint256 point, uint256 atBlock) external view returns (address) {
        return _slotReferee[modelId][_stakeTrees[modelId].findAt(point, atBlock)];
    }

    /// @inheritdoc IStakingRegistry
    function verifierStakeTotalAt(bytes32 modelId, uint256 atBlock) external view returns (uint256) {
        return _stakeTrees[_treeId(Role.Verifier, modelId)].totalWeightAt(atBlock);
    }

    /// @inheritdoc IStakingRegistry
    function verifierByStakeAt(bytes32 modelId, uint256 point, uint256 atBlock) external view returns (address) {
        bytes32 treeId = _treeId(Role.Verifier, modelId);
        return _slotReferee[treeId][_stakeTrees[treeId].findAt(point, atBlock)];
    }

    /// @inheritdoc IStakingRegistry
    function refereeWeight(address referee) external view returns (uint256) {
        return _treeWeight[referee];
    }

    /// @inheritdoc IStakingRegistry
    function stakeTreeChangedAt(bytes32 modelId) external view returns (uint256) {
        return _treeChangedAt[modelId];
    }

    /// @notice The stake-tree slot of `referee` for `modelId` (0 when it never registered for it) and the tree's
    /// slot count.
    function stakeTreeSlot(bytes32 modelId, address referee) external view returns (uint256 slot, uint256 size) {
        return (_treeSlot[modelId][referee], _stakeTrees[modelId].slotCount());
    }

    // ------------------------------------------------------------------ internals

    /// @dev Brings `account`'s weight in its models' stake trees to its active stake. A referee: its stake while not
    /// unbonding and at or above the floor (a penalty lowers the weight; only stake below the floor, a quarter of the
    /// registration minimum, leaves the pool). A verifier (the probe draw, docs/protocol.md "Soundness (v1.2)"): its
    /// stake while active. 0 otherwise.
    function _syncRefereeWeight(address account) private {
        Account storage acct = _accounts[account];
        uint256 stake = acct.stake;
        Role role = acct.role;
        uint256 minimum = role == Role.Referee ? refereeFloor() : minVerifierStake;
        bool active = (role == Role.Referee || role == Role.Verifier) && acct.unbondingSince == 0 && stake >= minimum;
        _setRefereeWeight(account, active ? stake : 0);
    }

    /// @dev Sets `account`'s weight in the trees of its role for every model it serves (≤ MAX_MODELS trees,
    /// O(log n) each).
    function _setRefereeWeight(address account, uint256 weight) private {
        uint256 current = _treeWeight[account];
        if (current == weight) return;
        _treeWeight[account] = weight;
        Role role = _accounts[account].role;
        bytes32[] storage models = _models[account];
        uint256 count = models.length; // <= MAX_MODELS
        for (uint256 i = 0; i < count; ++i) {
            bytes32 treeId = _treeId(role, models[i]);
            uint256 slot = _treeSlot[treeId][account];
            if (slot == 0) continue; // a drafter's model: no tree
            if (weight > current) _stakeTrees[treeId].add(slot, weight - current);
            else _stakeTrees[treeId].sub(slot, current - weight);
            _treeChangedAt[treeId] = block.number;
        }
        emit RefereeWeightSet(account, weight);
    }

    /// @dev The stake tree of `role` for `modelId`: referees' trees keep the model id itself (their views take it);
    /// verifiers' trees are keyed apart, so one model id can hold both.
    function _treeId(Role role, bytes32 modelId) private pure returns (bytes32) {
        // slither-disable-next-line incorrect-equality (an enum, not a balance)
        return role == Role.Verifier ? keccak256(abi.encode(VERIFIER_TREE_TAG, modelId)) : modelId;
    }

    function _register(Role role, uint256 minimum) private {
        Account storage account = _accounts[msg.sender];
        if (account.role != Role.None) revert AlreadyRegistered(msg.sender);
        if (msg.value < minimum || msg.value == 0) revert StakeBelowMinimum(msg.value, minimum);
        account.role = role;
        account.stake = uint128(msg.value);
        _registeredBlock[msg.sender] = block.number;
    }

    /// @dev Records the caller's vocabulary size of `modelId` (2..MAX_VOCAB).
    function _setVocab(bytes32 modelId, uint256 vocabSize) private {
        if (vocabSize < 2 || vocabSize > MAX_VOCAB) revert BadVocabSize(vocabSize);
        _vocab[msg.sender][modelId] = vocabSize;
        emit VocabSizeSet(msg.sender, modelId, vocabSize);
    }

    /// @dev O(1) swap-and-pop removal of `referee` from the list of `modelId`.
    function _removeReferee(bytes32 modelId, address referee) private {
        uint256 indexPlusOne = _refereeIndexPlusOne[modelId][referee];
        if (indexPlusOne == 0) return;
        address[] storage list = _referees[modelId];
        uint256 last = list.length - 1;
        if (indexPlusOne - 1 != last) {
            address moved = list[last];
            list[indexPlusOne - 1] = moved;
            _refereeIndexPlusOne[modelId][moved] = indexPlusOne;
        }
        list.pop();
        delete _refereeIndexPlusOne[modelId][referee];
    }
}
