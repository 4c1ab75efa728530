import pytest

from core import heap, versions


class Libc:
    """Stands in for glibc's mallopt: notes each setting."""
    def __init__(self):
        self.made = []

    def mallopt(self, parameter, value):
        self.made.append((parameter, value))
        return 1


@pytest.fixture
def libc(monkeypatch):
    made = Libc()
    monkeypatch.setattr(heap, "_libc", lambda: made)
    monkeypatch.setattr(versions, "GLIBC", True)
    return made


def test_a_threshold_is_set_for_a_while_then_glibc_is_left_where_its_dynamic_threshold_settles(libc, monkeypatch):
    monkeypatch.delenv(versions.MALLOC_ENV, raising=False)
    assert heap.mmap_threshold() == heap.GLIBC_MMAP_MAX == 32 * 2**20
    with heap.mapping_from(65536):
        assert heap.mmap_threshold() == 65536
        with heap.mapping_from(4096):
            assert heap.mmap_threshold() == 4096
        assert heap.mmap_threshold() == 65536
    assert heap.mmap_threshold() == heap.GLIBC_MMAP_MAX
    # M_MMAP_THRESHOLD is -3, M_TRIM_THRESHOLD -1: freed blocks up to 64 MiB kept, as the dynamic threshold keeps them
    assert libc.made == [(-3, 65536), (-3, 4096), (-3, 65536), (-3, 32 * 2**20), (-1, 64 * 2**20)]


def test_the_threshold_is_given_back_when_the_work_fails(libc):
    with pytest.raises(RuntimeError):
        with heap.mapping_from(65536):
            raise RuntimeError("out of memory")
    assert libc.made[-2:] == [(-3, 32 * 2**20), (-1, 64 * 2**20)]


def test_the_environment_s_threshold_holds_outside_a_setting_and_nothing_holds_off_glibc(libc, monkeypatch):
    assert heap.mmap_threshold({versions.MALLOC_ENV: "131072"}) == 131072
    assert heap.mmap_threshold({versions.MALLOC_ENV: "lots"}) == heap.GLIBC_MMAP_MAX  # glibc ignores it too
    monkeypatch.setattr(versions, "GLIBC", False)
    with heap.mapping_from(65536):
        assert heap.mmap_threshold({versions.MALLOC_ENV: "131072"}) is None
    assert libc.made == []
