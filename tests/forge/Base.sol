// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Vm} from "forge-std/Vm.sol";
import {SpecMath} from "../../contracts/lib/SpecMath.sol";

/// @dev Cheatcodes the campaign needs that forge-std 1.1.2's Vm interface (the npm package) does not declare; forge
/// answers them at the same cheatcode address.
interface VmExtra {
    function envOr(string calldata name, uint256 defaultValue) external view returns (uint256);
}

/// @dev What forge's invariant runner reads from the test contract (newer forge-std's StdInvariant declares it; 1.1.2
/// has none): `targetContracts()` and `targetSelectors()`, with this struct's ABI.
struct FuzzSelector {
    address addr;
    bytes4[] selectors;
}

/// @dev The campaign's fixed cast, deployment constants and the cheatcode handle, shared by the test and its handlers.
abstract contract CampaignBase {
    address internal constant VM_ADDRESS = address(uint160(uint256(keccak256("hevm cheat code"))));
    Vm internal constant vm = Vm(VM_ADDRESS);
    VmExtra internal constant vmx = VmExtra(VM_ADDRESS);

    uint256 internal constant WAD = 1e18;
    address internal constant BURN = 0x000000000000000000000000000000000000dEaD;
    bytes32 internal constant DRAFT = keccak256("verispec/forge/draft-model");
    bytes32 internal constant TARGET = keccak256("verispec/forge/target-model");
    uint256 internal constant VOCAB = 64;
    uint32 internal constant EOS = 2;
    uint256 internal constant INITIAL_ETH = 10_000 ether;

    // The cast: 2 requesters (also the challengers), 2 drafters, 2 verifiers, 5 referees. Each address keeps its
    // role for the whole run (it may unbond and register again), so every handler finds a counterparty.
    uint256 internal constant REQUESTERS = 2;
    uint256 internal constant DRAFTERS = 2;
    uint256 internal constant VERIFIERS = 2;
    uint256 internal constant REFEREES = 5;
    uint256 internal constant ACTORS = REQUESTERS + DRAFTERS + VERIFIERS + REFEREES;

    function actor(uint256 i) internal pure returns (address) {
        return address(uint160(0xA11CE0000 + i));
    }

    function requester(uint256 seed) internal pure returns (address) {
        return actor(seed % REQUESTERS);
    }

    function drafterAt(uint256 i) internal pure returns (address) {
        return actor(REQUESTERS + i % DRAFTERS);
    }

    function verifierAt(uint256 i) internal pure returns (address) {
        return actor(REQUESTERS + DRAFTERS + i % VERIFIERS);
    }

    function refereeAt(uint256 i) internal pure returns (address) {
        return actor(REQUESTERS + DRAFTERS + VERIFIERS + i % REFEREES);
    }

    /// @dev `x` mapped into [lo, hi] (forge-std's `bound` lives in its Test.sol, which 1.1.2 ships without ds-test).
    function bound(uint256 x, uint256 lo, uint256 hi) internal pure returns (uint256) {
        if (hi <= lo) return lo;
        unchecked {
            uint256 span = hi - lo + 1;
            return span == 0 ? x : lo + x % span;
        }
    }

    /// @dev H^n(value): the verifier's randomness hash chain, the market's own link (SpecMath.chainHash) n times.
    function chain(bytes32 value, uint256 n) internal pure returns (bytes32) {
        for (uint256 i = 0; i < n; ++i) {
            value = SpecMath.chainHash(value);
        }
        return value;
    }
}
