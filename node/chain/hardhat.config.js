// The config of Hardhat's dev chain (`verispec chain up --client hardhat`, node/chain/hardhat.py): nothing but
// the network, shaped like the anvil the project uses elsewhere (chain id 31337, the dev mnemonic's first 20
// accounts). Count and balance come from the environment so one file serves every caller.
module.exports = {
  networks: {
    hardhat: {
      chainId: 31337,
      accounts: {
        count: Number(process.env.VERISPEC_HARDHAT_ACCOUNTS || 20),
        accountsBalance: process.env.VERISPEC_HARDHAT_BALANCE_WEI || "100000000000000000000000",
      },
    },
  },
};
