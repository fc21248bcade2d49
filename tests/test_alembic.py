"""Alembic (SQLAlchemy 2, psycopg 3) against Headwater over a real socket: a small app's
migrations create tables with serial keys, a foreign key, an index, a unique
constraint and an enum column (CREATE TYPE), then add, rename and drop columns;
`alembic upgrade head` runs them, the autogenerate comparison of the app's models with
the reflected database finds no difference, the foreign key holds, and
`alembic downgrade base` undoes everything.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext

from tests.hwserver import HeadwaterServer

PREFIX = "alb_"  # tables of this module (the server is shared)

_ENV = """
from alembic import context
from sqlalchemy import create_engine

config = context.config
engine = create_engine(config.get_main_option("sqlalchemy.url"))
with engine.connect() as connection:
    context.configure(connection=connection, version_table="alb_version")
    with context.begin_transaction():
        context.run_migrations()
"""

_FIRST = """
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade():
    op.create_table(
        "alb_author",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("born", sa.Date),
    )
    op.create_table(
        "alb_book",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column(
            "author_id",
            sa.Integer,
            sa.ForeignKey("alb_author.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("isbn", sa.String(13)),
    )
    op.create_index("ix_alb_book_title", "alb_book", ["title"])


def downgrade():
    op.drop_index("ix_alb_book_title", table_name="alb_book")
    op.drop_table("alb_book")
    op.drop_table("alb_author")
"""

_SECOND = """
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade():
    op.add_column("alb_book", sa.Column("pages", sa.Integer, server_default="0"))
    op.alter_column("alb_book", "title", new_column_name="name")
    op.drop_column("alb_book", "isbn")
    op.create_table(
        "alb_review",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("book_id", sa.BigInteger, nullable=False),
        sa.Column("stars", sa.SmallInteger),
        sa.Column("mood", sa.Enum("bad", "ok", "good", name="alb_mood")),
    )
    op.create_foreign_key(
        "alb_review_book_fk", "alb_review", "alb_book", ["book_id"], ["id"]
    )
    op.create_unique_constraint("alb_review_book_uq", "alb_review", ["book_id", "id"])


def downgrade():
    op.drop_constraint("alb_review_book_uq", "alb_review", type_="unique")
    op.drop_constraint("alb_review_book_fk", "alb_review", type_="foreignkey")
    op.drop_table("alb_review")
    sa.Enum(name="alb_mood").drop(op.get_bind())
    op.add_column("alb_book", sa.Column("isbn", sa.String(13)))
    op.alter_column("alb_book", "name", new_column_name="title")
    op.drop_column("alb_book", "pages")
"""


def _models() -> sa.MetaData:
    """The app's models at revision 0002 (what autogenerate compares with)."""
    md = sa.MetaData()
    sa.Table(
        "alb_author",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("born", sa.Date),
    )
    sa.Table(
        "alb_book",
        md,
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column(
            "author_id",
            sa.Integer,
            sa.ForeignKey("alb_author.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.Text, nullable=False, index=True),
        sa.Column("pages", sa.Integer, server_default="0"),
    )
    md.tables["alb_book"].indexes.clear()
    sa.Index("ix_alb_book_title", md.tables["alb_book"].c.name)
    sa.Table(
        "alb_review",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "book_id",
            sa.BigInteger,
            sa.ForeignKey("alb_book.id", name="alb_review_book_fk"),
            nullable=False,
        ),
        sa.Column("stars", sa.SmallInteger),
        sa.Column("mood", sa.Enum("bad", "ok", "good", name="alb_mood")),
        sa.UniqueConstraint("book_id", "id", name="alb_review_book_uq"),
    )
    return md


@pytest.fixture(scope="module")
def alembic_cfg(hw_server: HeadwaterServer, tmp_path_factory: pytest.TempPathFactory) -> Config:
    root: Path = tmp_path_factory.mktemp("alembic_app")
    (root / "versions").mkdir()
    (root / "env.py").write_text(textwrap.dedent(_ENV))
    (root / "script.py.mako").write_text("")
    (root / "versions" / "0001_first.py").write_text(textwrap.dedent(_FIRST))
    (root / "versions" / "0002_second.py").write_text(textwrap.dedent(_SECOND))
    cfg = Config()
    cfg.set_main_option("script_location", str(root))
    url = f"postgresql+psycopg://headwater@{hw_server.host}:{hw_server.port}/headwater"
    cfg.set_main_option("sqlalchemy.url", url)
    return cfg


def _our_tables(obj: object, name: str | None, type_: str, reflected: bool, other: object) -> bool:
    return type_ != "table" or ((name or "").startswith(PREFIX) and name != "alb_version")


def test_upgrade_compare_downgrade(alembic_cfg: Config) -> None:
    command.upgrade(alembic_cfg, "head")
    engine = sa.create_engine(alembic_cfg.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn,
                opts={
                    "include_object": _our_tables,
                    "compare_type": True,
                    "compare_server_default": True,
                },
            )
            diff = compare_metadata(ctx, _models())
            assert diff == [], diff
            insp = sa.inspect(conn)
            fks = insp.get_foreign_keys("alb_book")
            assert [(f["name"], f["constrained_columns"], f["referred_table"]) for f in fks] == [
                ("alb_book_author_id_fkey", ["author_id"], "alb_author")
            ]
            assert fks[0]["options"] == {"ondelete": "CASCADE"}
        with engine.begin() as conn:
            author = conn.execute(
                sa.text("INSERT INTO alb_author (name) VALUES ('Le Guin') RETURNING id")
            ).scalar_one()
            assert author == 1  # serial
            conn.execute(
                sa.text("INSERT INTO alb_book (id, author_id, name) VALUES (1, :a, 'Earthsea')"),
                {"a": author},
            )
            conn.execute(  # an enum column (CREATE TYPE by SQLAlchemy with the table)
                sa.text("INSERT INTO alb_review VALUES (1, 1, 5, :m), (2, 1, 1, 'bad')"),
                {"m": "good"},
            )
            moods = "SELECT mood FROM alb_review WHERE mood > 'ok' ORDER BY mood"
            assert conn.execute(sa.text(moods)).scalars().all() == ["good"]
            conn.execute(sa.text("DELETE FROM alb_review"))
        with pytest.raises(sa.exc.IntegrityError, match="alb_book_author_id_fkey"):
            with engine.begin() as conn:
                conn.execute(
                    sa.text("INSERT INTO alb_book (id, author_id, name) VALUES (2, 99, 'x')")
                )
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM alb_author"))
            assert conn.execute(sa.text("SELECT count(*) FROM alb_book")).scalar_one() == 0
        command.downgrade(alembic_cfg, "base")
        with engine.connect() as conn:
            left = [t for t in sa.inspect(conn).get_table_names() if t.startswith(PREFIX)]
            assert left == ["alb_version"]
            version = conn.execute(sa.text("SELECT count(*) FROM alb_version")).scalar_one()
            assert version == 0
        command.upgrade(alembic_cfg, "head")  # again, from scratch
        command.downgrade(alembic_cfg, "base")
    finally:
        engine.dispose()
