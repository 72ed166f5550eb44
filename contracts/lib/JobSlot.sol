// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title JobSlot
/// @notice The two packed storage words of a market job that the cycle hot path loads and stores whole.
/// Slot 0: drafter, state (status in the low 4 bits, flags in the high 4), γ, cycle, emitted, rejected, deadline.
/// Slot 1: verifier, maxTokens, EOS token, open disputes, vocabulary size.
/// @dev The offsets are where Solidity packs `InferenceMarket.Job` (fields right-aligned, in declaration order);
/// tests/test_job_slot.py checks them against the compiler's storage layout and pins them with known words.
/// Readers mask their field. `pack` and `nextCycle` do not mask (the hot path would pay for it every cycle): each
/// field must fit its width, which the market guarantees (cycle, emitted and rejected never exceed
/// maxTokens < 2^16; state and γ come from the word itself); only the deadline is cut to its 32 bits, as a uint32
/// cast would. The market writes slot 0 with `nextCycle` (a verified cycle changes five fields and keeps two):
/// with seven arguments `pack` costs ~50 gas more per verification in stack clean-up, so it is the reference
/// definition `nextCycle` is tested against.
library JobSlot {
    uint256 internal constant STATE_AT = 160;
    uint256 internal constant GAMMA_AT = 168;
    uint256 internal constant CYCLE_AT = 176;
    uint256 internal constant EMITTED_AT = 192;
    uint256 internal constant REJECTED_AT = 208;
    uint256 internal constant DEADLINE_AT = 224;
    uint256 internal constant MAX_TOKENS_AT = 160;
    uint256 internal constant EOS_AT = 176;
    uint256 internal constant OPEN_DISPUTES_AT = 208;
    uint256 internal constant VOCAB_AT = 224;
    /// @notice The job status's bits in `state`.
    uint256 internal constant STATUS_MASK = 0x0f;

    // ------------------------------------------------------------------ slot 0

    /// @notice Slot 0 from its fields.
    /// @param drafter_ The job's drafter.
    /// @param state_ Status and flags, 8 bits.
    /// @param gamma_ Proposals per cycle, 8 bits.
    /// @param cycle_ Cycles verified so far, 16 bits.
    /// @param emitted_ Output tokens so far, 16 bits.
    /// @param rejected_ Verified cycles with a rejection, 16 bits.
    /// @param deadline_ The current phase's deadline; only its low 32 bits are kept.
    /// @return word The packed word.
    function pack(
        address drafter_,
        uint256 state_,
        uint256 gamma_,
        uint256 cycle_,
        uint256 emitted_,
        uint256 rejected_,
        uint256 deadline_
    ) internal pure returns (uint256 word) {
        return uint256(uint160(drafter_)) | (state_ << STATE_AT) | (gamma_ << GAMMA_AT) | (cycle_ << CYCLE_AT)
            | (emitted_ << EMITTED_AT) | (rejected_ << REJECTED_AT) | (deadline_ << DEADLINE_AT);
    }

    /// @notice Slot 0 after a verified cycle: the same drafter and γ, the next cycle, `count` more tokens emitted,
    /// `rejection` (0 or 1) more cycles with a rejection, and the new state and deadline. Equal to `pack` of those
    /// fields (tests/test_job_slot.py), without unpacking the fields that stay.
    /// @param word Slot 0 before the cycle.
    /// @param state_ Status and flags after the cycle, 8 bits.
    /// @param count Tokens the cycle emitted (the sum stays below 2^16).
    /// @param rejection 1 if the cycle had a rejection, else 0.
    /// @param deadline_ The next phase's deadline; only its low 32 bits are kept.
    /// @return next The packed word.
    function nextCycle(uint256 word, uint256 state_, uint256 count, uint256 rejection, uint256 deadline_)
        internal
        pure
        returns (uint256 next)
    {
        unchecked {
            // cycle + 1, emitted + count and rejected + rejection stay within their 16 bits (see the contract notes)
            next = (word & (type(uint160).max | (uint256(0xff) << GAMMA_AT))) | (state_ << STATE_AT)
                | ((((word >> CYCLE_AT) & 0xffff) + 1) << CYCLE_AT)
                | ((((word >> EMITTED_AT) & 0xffff) + count) << EMITTED_AT)
                | ((((word >> REJECTED_AT) & 0xffff) + rejection) << REJECTED_AT) | (deadline_ << DEADLINE_AT);
        }
    }

    /// @notice The drafter in slot 0.
    function drafter(uint256 word) internal pure returns (address) {
        return address(uint160(word));
    }

    /// @notice Status and flags (8 bits) in slot 0.
    function state(uint256 word) internal pure returns (uint256) {
        return (word >> STATE_AT) & 0xff;
    }

    /// @notice The job status (low 4 bits of the state) in slot 0.
    function status(uint256 word) internal pure returns (uint256) {
        return (word >> STATE_AT) & STATUS_MASK;
    }

    /// @notice γ in slot 0.
    function gamma(uint256 word) internal pure returns (uint256) {
        return (word >> GAMMA_AT) & 0xff;
    }

    /// @notice Cycles verified so far (the next cycle to draft or verify) in slot 0.
    function cycle(uint256 word) internal pure returns (uint256) {
        return (word >> CYCLE_AT) & 0xffff;
    }

    /// @notice Output tokens so far in slot 0.
    function emitted(uint256 word) internal pure returns (uint256) {
        return (word >> EMITTED_AT) & 0xffff;
    }

    /// @notice Verified cycles with a rejection in slot 0.
    function rejected(uint256 word) internal pure returns (uint256) {
        return (word >> REJECTED_AT) & 0xffff;
    }

    /// @notice The current phase's deadline in slot 0.
    function deadline(uint256 word) internal pure returns (uint256) {
        return word >> DEADLINE_AT;
    }

    // ------------------------------------------------------------------ slot 1

    /// @notice The verifier in slot 1.
    function verifier(uint256 info) internal pure returns (address) {
        return address(uint160(info));
    }

    /// @notice maxTokens in slot 1.
    function maxTokens(uint256 info) internal pure returns (uint256) {
        return (info >> MAX_TOKENS_AT) & 0xffff;
    }

    /// @notice The EOS token in slot 1.
    function eosToken(uint256 info) internal pure returns (uint256) {
        return (info >> EOS_AT) & 0xffffffff;
    }

    /// @notice Open disputes in slot 1.
    function openDisputes(uint256 info) internal pure returns (uint256) {
        return (info >> OPEN_DISPUTES_AT) & 0xffff;
    }

    /// @notice The job's vocabulary size (the registered vocabulary of both models) in slot 1: every token the
    /// chain accepts is below it (docs/protocol.md §4, "Token ranges").
    function vocabSize(uint256 info) internal pure returns (uint256) {
        return info >> VOCAB_AT;
    }
}
