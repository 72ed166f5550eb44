"""The drafter's room: `verispec serve drafter`.

node          DrafterNode (DraftSession per job; commitDraft; answers DraftReplay disputes)
chain_checks  what the drafter reads from chain, checked as hostile input
"""
