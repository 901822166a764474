"""The /ping apps under test: ours and one small file per peer, all answering the same bytes."""
