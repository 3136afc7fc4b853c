"""What the growth benchmark's bulk load runs to set an index or a constraint aside and back."""

from __future__ import annotations

from bench.growth_bulk import Deferred


def test_an_index_is_dropped_and_rebuilt_from_its_own_definition() -> None:
    trgm = "CREATE INDEX ix_messages_content_trgm ON messages USING gin (content gin_trgm_ops)"
    index = Deferred("messages", "ix_messages_content_trgm", "i", trgm)
    assert index.drop() == 'DROP INDEX "ix_messages_content_trgm"'
    assert index.create() == trgm


def test_a_constraint_is_dropped_and_added_back_by_name_on_its_table() -> None:
    fk = Deferred(
        "context_items",
        "fk_context_items_message_id_messages",
        "f",
        "FOREIGN KEY (message_id) REFERENCES messages(id) ON DELETE CASCADE",
    )
    assert fk.drop() == (
        'ALTER TABLE "context_items" DROP CONSTRAINT "fk_context_items_message_id_messages"'
    )
    assert fk.create() == (
        'ALTER TABLE "context_items" ADD CONSTRAINT "fk_context_items_message_id_messages" '
        "FOREIGN KEY (message_id) REFERENCES messages(id) ON DELETE CASCADE"
    )
