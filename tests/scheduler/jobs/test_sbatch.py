"""sbatch's options and ``#SBATCH`` lines read as sbatch reads them, into a request's
fields: every option that maps to a field, every time format, the precedence, and
every other option refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.jobs.sbatch import (
    SbatchError,
    fields_of,
    flag_names,
    merge,
    parse_time,
    read_options,
    script_directives,
    with_arguments,
)


def fields(*words: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fields a command line's options make (raising on any problem)."""
    found, problems = read_options(words)
    assert not problems
    return fields_of(merge([], found), given=given or {}).fields


def problems(*words: str, given: dict[str, Any] | None = None) -> list[str]:
    """Every problem a command line's options have, reading them or their values."""
    found, wrong = read_options(words)
    try:
        fields_of(merge([], found), given=given or {})
    except SbatchError as exc:
        wrong += exc.command_line
    return wrong


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["-J", "train"], {"name": "train"}),
        (["--job-name=train"], {"name": "train"}),
        (["--job-name", "train"], {"name": "train"}),
        (["-Jtrain"], {"name": "train"}),
        (["--job=train"], {"name": "train"}),
        (["-A", "vision"], {"account": "vision"}),
        (["--account=vision"], {"account": "vision"}),
        (["-q", "high"], {"qos": "high"}),
        (["--qos=high"], {"qos": "high"}),
        (["-t", "60"], {"walltime_seconds": 3600}),
        (["--time=01:00:00"], {"walltime_seconds": 3600}),
        (["-N", "2"], {"nodes": 2}),
        (["--nodes=2-2"], {"nodes": 2}),
        (["--gres=gpu:2"], {"gpus_per_node": 2}),
        (["--gres=gpu:H100-80GB:2"], {"gpus_per_node": 2, "gpu_model": "H100-80GB"}),
        (["--gres=gpu"], {"gpus_per_node": 1}),
        (["--gres=gpu:L4"], {"gpus_per_node": 1, "gpu_model": "L4"}),
        (["--gpus=4"], {"gpus_per_node": 4}),
        (["-G", "L4:4"], {"gpus_per_node": 4, "gpu_model": "L4"}),
        (["--gpus=8", "-N", "2"], {"gpus_per_node": 4, "nodes": 2}),
        (["--gpus-per-node=3"], {"gpus_per_node": 3}),
        (["--gpus-per-node=L4:3"], {"gpus_per_node": 3, "gpu_model": "L4"}),
        (["--gpus-per-task=2"], {"gpus_per_node": 2}),
        (["-c", "4"], {"cpus_per_node": "4"}),
        (["--cpus-per-task=4", "--ntasks-per-node=1", "-n", "1"], {"cpus_per_node": "4"}),
        (["--mem=16G"], {"memory_mib_per_node": 16384}),
        (["--mem", "16G"], {"memory_mib_per_node": 16384}),
        (["--mem=2048"], {"memory_mib_per_node": 2048}),
        (["--mem=2048M"], {"memory_mib_per_node": 2048}),
        (["--mem=1500K"], {"memory_mib_per_node": 2}),
        (["--mem=1T"], {"memory_mib_per_node": 1048576}),
        (["--mem=8gb"], {"memory_mib_per_node": 8192}),
        (["-a", "0-3"], {"array": "0-3"}),
        (["--array=0-15:4%2"], {"array": "0-15:4%2"}),
        (["-d", "afterok:12"], {"dependencies": [{"type": "afterok", "job": 12}]}),
        (
            ["--dependency=afterok:12:13,afterany:14"],
            {
                "dependencies": [
                    {"type": "afterok", "job": 12},
                    {"type": "afterok", "job": 13},
                    {"type": "afterany", "job": 14},
                ]
            },
        ),
        (["--nice=10"], {"nice": 10}),
        (["--nice"], {"nice": 100}),
        (["--reservation=maint"], {"reservation": "maint"}),
        (["-C", "rack=r1"], {"node_labels": {"rack": "r1"}}),
        (["--constraint=rack=r1&net=ib"], {"node_labels": {"rack": "r1", "net": "ib"}}),
        (["-D", "/home/alice/run"], {"workdir": "/home/alice/run"}),
        (["--chdir=/home/alice/run"], {"workdir": "/home/alice/run"}),
        (["-o", "out-%j.txt"], {"output_path": "out-%j.txt"}),
        (["-oout-%j.txt"], {"output_path": "out-%j.txt"}),
        (["--output=/home/alice/logs/%x-%A_%a.out"], {"output_path": "/home/alice/logs/%x-%A_%a.out"}),
        (["-e", "err-%j.txt"], {"error_path": "err-%j.txt"}),
        (["--error=err-%j.txt", "--output", "out-%j.txt"], {"error_path": "err-%j.txt", "output_path": "out-%j.txt"}),
        (["--out=o.txt"], {"output_path": "o.txt"}),
        (["-H"], {"hold": True}),
        (["--hold"], {"hold": True}),
        (["--wrap", "echo hi"], {"command": "echo hi"}),
        (["--mail-type=END,FAIL"], {"mail_type": "END,FAIL"}),
        (["--mail-type", "ALL"], {"mail_type": "ALL"}),
        (["--mail-user=alice@example.org"], {"mail_user": "alice@example.org"}),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_every_option_that_maps_to_a_field_is_applied(words, expected):
    assert fields(*words) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("60", 3600),  # minutes
        ("90:30", 5430),  # minutes:seconds
        ("01:00:00", 3600),  # hours:minutes:seconds
        ("2-12", 2 * 86400 + 12 * 3600),  # days-hours
        ("2-12:30", 2 * 86400 + 12 * 3600 + 1800),  # days-hours:minutes
        ("2-12:30:15", 2 * 86400 + 12 * 3600 + 1815),  # days-hours:minutes:seconds
        ("1h", 3600),
        ("90m", 5400),
        ("1d", 86400),
        ("45s", 45),
    ],
)
def test_every_time_format_of_sbatch(text, seconds):
    assert parse_time(text) == seconds


@pytest.mark.parametrize("text", ["0", "UNLIMITED", "1:2:3:4", "1-", "-5", "1-2-3", "1h30", "", "²"])
def test_a_time_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="time"):
        parse_time(text)


@pytest.mark.parametrize(
    ("words", "words_said"),
    [
        (["--partition=gpu"], "--partition=gpu is not supported: there are no partitions here"),
        (["-p", "gpu"], "-p gpu is not supported: there are no partitions here"),
        (["--mail=END"], "--mail=END is not an sbatch option the portal applies"),  # --mail-type or --mail-user?
        (["--exclusive"], "--exclusive is not supported"),
        (["--begin=now+1hour"], "--begin=now+1hour is not supported"),
        (["-w", "node1"], "-w node1 is not supported: the scheduler chooses the nodes"),
        (["--mem-per-cpu=4G"], "give the memory per node with --mem"),
        (["--signal=B:USR1@60"], "--signal=B:USR1@60 is not an sbatch option the portal applies"),
        (["--licenses", "matlab"], "--licenses matlab is not an sbatch option the portal applies"),
        (["train.py"], "'train.py' is not an option"),
        (["-t"], "-t needs a value"),
        (["--hold=yes"], "--hold takes no value"),
        (["-t", "forever"], "-t forever: 'forever' is not a time"),
        (["-N", "1-4"], "a range of node counts is not supported"),
        (["--gres=shard:2"], "only GPUs are a GRES here"),
        (["--gpus=3", "-N", "2"], "3 GPUs do not share out evenly over 2 nodes"),
        (["--ntasks=4"], "one task per node (1)"),
        (["--ntasks-per-node=8"], "one task per node"),
        (["--mem=0"], "all of a node's memory"),
        (["--mem=lots"], "not an amount of memory"),
        (["-d", "afterok:12?afterany:13"], "any-of dependencies"),
        (["-d", "singleton"], "singleton"),
        (["-C", "ib"], "node labels here are label=value"),
        (["-C", "rack=r1|rack=r2"], "node labels here are label=value"),
        (["--nice=low"], "not a whole number"),
    ],
)
def test_an_option_not_applied_is_refused_by_name(words, words_said):
    said = problems(*words)
    assert any(words_said in line for line in said), said


def test_problems_are_all_told_at_once():
    assert len(problems("--partition=gpu", "-t", "forever", "--exclusive")) == 3


SCRIPT = """#!/bin/bash
# a comment, then a blank line

#SBATCH --job-name=first -t 10   # a comment after the options
#SBATCH -J "quoted name"
  #SBATCH --partition=indented-so-a-comment
##SBATCH --partition=doubled-so-a-comment
#SBATCHX --partition=not-a-directive
#SBATCH --gres=gpu:2
python train.py
#SBATCH --partition=after-the-first-command
"""


def test_a_script_s_directives_are_read_as_sbatch_reads_them():
    given, wrong = script_directives(SCRIPT)

    assert not wrong
    request = fields_of(merge(given, []), given={})
    assert request.fields == {"name": "quoted name", "walltime_seconds": 600, "gpus_per_node": 2}
    assert request.sources["name"].where == "-J quoted name (#SBATCH line 5)"


def test_the_command_line_wins_over_the_script_and_the_last_of_one_place_wins():
    script, _ = script_directives("#!/bin/bash\n#SBATCH -t 10 --gres=gpu:2 -J a\n#SBATCH -J b\ntrue\n")
    command_line, _ = read_options(["--time=20", "--gpus-per-node=1"])

    request = fields_of(merge(script, command_line), given={})

    assert request.fields == {"walltime_seconds": 1200, "gpus_per_node": 1, "name": "b"}
    assert not request.sources["walltime_seconds"].in_script and request.sources["name"].in_script


def test_a_script_s_output_and_error_files_are_applied_and_the_command_line_wins():
    script, wrong = script_directives("#!/bin/bash\n#SBATCH -o logs/%x-%j.out\n#SBATCH -e logs/%x-%j.err\ntrue\n")
    command_line, _ = read_options(["--output=run-%j.out"])

    request = fields_of(merge(script, command_line), given={})

    assert not wrong
    assert request.fields == {"output_path": "run-%j.out", "error_path": "logs/%x-%j.err"}
    assert request.sources["error_path"].where == "-e logs/%x-%j.err (#SBATCH line 3)"


def test_gpus_in_all_share_out_over_the_nodes_the_body_gives():
    assert fields("--gpus=8", given={"nodes": 4}) == {"gpus_per_node": 2}


def test_a_script_s_refused_directive_names_its_line():
    _, wrong = script_directives("#!/bin/bash\n#SBATCH -t 10\n#SBATCH --partition=gpu\ntrue\n")
    assert wrong == [
        "--partition=gpu (#SBATCH line 3) is not supported: there are no partitions here; the scheduler chooses "
        "the nodes: ask for hardware with --gres/--gpus and --constraint (node labels)"
    ]


def test_an_unreadable_directive_line_is_named():
    _, wrong = script_directives('#!/bin/bash\n#SBATCH -J "unclosed\ntrue\n')
    assert wrong and wrong[0].startswith("#SBATCH line 2 cannot be read")


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("#!/bin/bash\n#SBATCH -t 5\necho $1\n", "#!/bin/bash\n#SBATCH -t 5\nset -- 'a b' c\necho $1\n"),
        ("#!/bin/bash\n#SBATCH -t 5", "#!/bin/bash\n#SBATCH -t 5\nset -- 'a b' c\n"),
        ("echo $1\n", "set -- 'a b' c\necho $1\n"),
    ],
    ids=["after the directives", "no command", "no directives"],
)
def test_script_arguments_go_where_the_directives_end(script, expected):
    assert with_arguments(script, ["a b", "c"]) == expected
    assert with_arguments(script, []) == script


def test_the_flags_are_the_options_that_never_take_the_next_word():
    assert {"-H", "--hold", "--nice", "--exclusive"} <= flag_names()
    assert not {"-t", "--time", "-J"} & flag_names()
