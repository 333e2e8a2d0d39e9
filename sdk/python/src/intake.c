/* headway._intake: what Reporter.report() does on the training loop's thread, in C.
 *
 * report() runs right after a training step, when little of the interpreter is in
 * the CPU's caches: what it costs there is mostly the memory it touches. The
 * Python intake (headway.reporter.PyIntake) builds a frame, a keyword dict, a
 * 7-tuple, a float and an int per call, about 1.6 us above an empty C call in a
 * PyTorch loop (sdk/python/bench_torch_loop.py). This one keeps the call as it
 * came: a tuple of the argument values and the caller's own tuple of keyword
 * names, with the time as a C double, in a ring of preallocated slots. Which
 * argument is the step and which are metrics is sorted out in take(), on the
 * sender's thread.
 *
 * The ring holds `capacity` reports. Full, it drops the oldest, as a deque with
 * maxlen would; report numbers then skip, which is how the sender counts drops.
 * Every method runs holding the GIL, so report() from several threads needs no
 * lock. take() moves each slot out of the ring before it allocates anything:
 * an allocation may run the garbage collector and so other threads' report().
 *
 * report() raises TypeError where a Python function of its signature would (no
 * step, a step given twice, two positional arguments), and MemoryError; nothing
 * else. Should a name built at run time hide a second step from its identity
 * check, take() gives the report step None and the sender drops it with a warning.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct {
    PyObject *values; /* positional then keyword argument values; NULL: slot empty */
    PyObject *names;  /* the keyword names (the caller's tuple), or NULL */
    double time;      /* seconds since the epoch, when report() was called */
    uint64_t number;  /* 1 for the first report */
} Slot;

typedef struct {
    PyObject_HEAD
    Slot *ring;
    Py_ssize_t capacity;
    Py_ssize_t head;  /* the oldest report */
    Py_ssize_t held;
    Py_ssize_t wake_at;
    uint64_t number;  /* of the last report */
    PyObject *wake;   /* called with no arguments when held >= wake_at */
    PyObject *last_total_steps;  /* from the last report giving either total, */
    PyObject *last_total_epochs; /* None where it gave only the other */
    char accepting;   /* report() returns at once while false */
} Intake;

/* The keyword names report() takes itself; every other keyword is a metric. */
static PyObject *name_step, *name_total_steps, *name_epoch, *name_total_epochs;

static double
wall_clock_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* what time.time() reads */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void
release_slot(Slot *slot)
{
    Py_CLEAR(slot->values);
    Py_CLEAR(slot->names);
}

/* Moves the oldest report out of the ring (held > 0); the caller releases it
 * once the ring is whole, since freeing objects may run code. */
static Slot
pop_oldest(Intake *self)
{
    Slot slot = self->ring[self->head];
    self->ring[self->head].values = NULL;
    self->ring[self->head].names = NULL;
    self->head = (self->head + 1) % self->capacity;
    self->held--;
    return slot;
}

static PyObject *
intake_report(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Intake *self = (Intake *)op;
    if (!self->accepting || self->ring == NULL) /* or never initialised */
        Py_RETURN_NONE;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    /* Names are compared by identity: reading each name's text would touch memory
     * that is cold here, and call sites pass the interned names this module holds.
     * take() compares text, so a name built at run time still counts; a total under
     * such a name is only not carried over after drops. */
    PyObject *total_steps = Py_None, *total_epochs = Py_None;
    int steps_given = nargs;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (name == name_total_steps)
            total_steps = args[nargs + i];
        else if (name == name_total_epochs)
            total_epochs = args[nargs + i];
        else if (name == name_step)
            steps_given++;
    }
    if (steps_given == 0) { /* unless its name was built at run time */
        for (Py_ssize_t i = 0; i < nkw; i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            if (PyUnicode_Check(name) && PyUnicode_Compare(name, name_step) == 0)
                steps_given++;
        }
    }
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError,
                     "report() takes 1 positional argument but %zd were given", nargs);
        return NULL;
    }
    if (steps_given != 1) {
        PyErr_SetString(PyExc_TypeError,
                        steps_given == 0
                            ? "report() missing 1 required positional argument: 'step'"
                            : "report() got multiple values for argument 'step'");
        return NULL;
    }
    PyObject *values = PyTuple_New(nargs + nkw);
    if (values == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(values, i, args[i]);
    }
    /* Remembered for the sender, which carries them over to the next report kept
     * when the ring dropped the ones that held them. */
    if (total_steps != Py_None || total_epochs != Py_None) {
        Py_INCREF(total_steps);
        Py_INCREF(total_epochs);
        Py_SETREF(self->last_total_steps, total_steps);
        Py_SETREF(self->last_total_epochs, total_epochs);
    }
    Slot oldest = {NULL, NULL, 0.0, 0};
    if (self->held == self->capacity) { /* full: the oldest goes */
        oldest = pop_oldest(self);
    }
    Slot *slot = &self->ring[(self->head + self->held) % self->capacity];
    Py_XINCREF(kwnames);
    slot->values = values;
    slot->names = kwnames;
    slot->time = wall_clock_seconds();
    slot->number = ++self->number;
    self->held++;
    release_slot(&oldest); /* once the ring is whole again: freeing may run code */
    if (self->held >= self->wake_at && self->wake != NULL) {
        /* The Python wake never raises into the loop; should it, its error is not the
         * caller's either. */
        PyObject *woken = PyObject_CallNoArgs(self->wake);
        if (woken == NULL)
            PyErr_WriteUnraisable(self->wake);
        Py_XDECREF(woken);
    }
    Py_RETURN_NONE;
}

static int
same_name(PyObject *a, PyObject *b)
{
    return a == b || (PyUnicode_Check(a) && PyUnicode_Compare(a, b) == 0);
}

/* (number, time, step, total_steps, epoch, total_epochs, metrics) of one call. */
static PyObject *
read_call(uint64_t number, double time, PyObject *values, PyObject *names)
{
    Py_ssize_t nkw = names == NULL ? 0 : PyTuple_GET_SIZE(names);
    Py_ssize_t nargs = PyTuple_GET_SIZE(values) - nkw;
    PyObject *step = nargs == 1 ? PyTuple_GET_ITEM(values, 0) : NULL;
    int unreadable = nargs > 1;
    PyObject *total_steps = Py_None, *epoch = Py_None, *total_epochs = Py_None;
    PyObject *metrics = NULL;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        PyObject *value = PyTuple_GET_ITEM(values, nargs + i);
        if (same_name(name, name_total_steps)) {
            total_steps = value;
        } else if (same_name(name, name_epoch)) {
            epoch = value;
        } else if (same_name(name, name_total_epochs)) {
            total_epochs = value;
        } else if (same_name(name, name_step)) {
            unreadable |= step != NULL;
            step = value;
        } else {
            if (metrics == NULL && (metrics = PyDict_New()) == NULL)
                return NULL;
            if (PyDict_SetItem(metrics, name, value) < 0) {
                Py_DECREF(metrics);
                return NULL;
            }
        }
    }
    if (step == NULL || unreadable)
        step = Py_None;
    PyObject *entry = Py_BuildValue("(KdOOOOO)", (unsigned long long)number, time, step,
                                    total_steps, epoch, total_epochs,
                                    metrics == NULL ? Py_None : metrics);
    Py_XDECREF(metrics);
    return entry;
}

static PyObject *
intake_take(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    Intake *self = (Intake *)op;
    PyObject *taken = PyList_New(0);
    if (taken == NULL)
        return NULL;
    while (self->held > 0) {
        Slot slot = pop_oldest(self);
        PyObject *entry = read_call(slot.number, slot.time, slot.values, slot.names);
        release_slot(&slot);
        if (entry == NULL || PyList_Append(taken, entry) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(taken);
            return NULL;
        }
        Py_DECREF(entry);
    }
    return taken;
}

static PyObject *
intake_clear_reports(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    Intake *self = (Intake *)op;
    while (self->held > 0) {
        Slot slot = pop_oldest(self);
        release_slot(&slot);
    }
    Py_RETURN_NONE;
}

static Py_ssize_t
intake_length(PyObject *op)
{
    return ((Intake *)op)->held;
}

static PyObject *
intake_get_last_totals(PyObject *op, void *Py_UNUSED(closure))
{
    Intake *self = (Intake *)op;
    return PyTuple_Pack(2, self->last_total_steps, self->last_total_epochs);
}

static int
intake_init(PyObject *op, PyObject *args, PyObject *kwds)
{
    Intake *self = (Intake *)op;
    static char *keywords[] = {"capacity", "wake", NULL};
    Py_ssize_t capacity;
    PyObject *wake;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nO:Intake", keywords, &capacity, &wake))
        return -1;
    if (self->ring != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Intake: initialised already");
        return -1;
    }
    if (capacity < 1 || (size_t)capacity > PY_SSIZE_T_MAX / sizeof(Slot)) {
        PyErr_SetString(PyExc_ValueError, "Intake: capacity must be >= 1");
        return -1;
    }
    if (!PyCallable_Check(wake)) {
        PyErr_SetString(PyExc_TypeError, "Intake: wake must be callable");
        return -1;
    }
    self->ring = PyMem_Calloc((size_t)capacity, sizeof(Slot));
    if (self->ring == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->capacity = capacity;
    Py_INCREF(wake);
    self->wake = wake;
    Py_INCREF(Py_None);
    self->last_total_steps = Py_None;
    Py_INCREF(Py_None);
    self->last_total_epochs = Py_None;
    self->wake_at = 1;
    return 0;
}

/* A Reporter holds its intake and the intake the reporter's wake method: a cycle
 * that only the garbage collector frees. Reports may hold anything the caller
 * passed. */
static int
intake_traverse(PyObject *op, visitproc visit, void *arg)
{
    Intake *self = (Intake *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->wake);
    Py_VISIT(self->last_total_steps);
    Py_VISIT(self->last_total_epochs);
    for (Py_ssize_t i = 0; i < self->held; i++) {
        Slot *slot = &self->ring[(self->head + i) % self->capacity];
        Py_VISIT(slot->values);
        Py_VISIT(slot->names);
    }
    return 0;
}

static int
intake_clear(PyObject *op)
{
    Intake *self = (Intake *)op;
    if (self->ring != NULL) {
        PyObject *none = intake_clear_reports(op, NULL);
        Py_XDECREF(none);
    }
    Py_CLEAR(self->wake);
    Py_CLEAR(self->last_total_steps);
    Py_CLEAR(self->last_total_epochs);
    return 0;
}

static void
intake_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    intake_clear(op);
    PyMem_Free(((Intake *)op)->ring);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyMethodDef intake_methods[] = {
    {"report", (PyCFunction)(void (*)(void))intake_report, METH_FASTCALL | METH_KEYWORDS,
     "report(step, *, total_steps=None, epoch=None, total_epochs=None, **metrics)\n"
     "--\n\n"
     "Keeps one call as it came; reads and checks nothing."},
    {"take", intake_take, METH_NOARGS,
     "The reports held, oldest first, as (number, time, step, total_steps, epoch,\n"
     "total_epochs, metrics) tuples; the intake is then empty."},
    {"clear", intake_clear_reports, METH_NOARGS, "Drops every report held."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef intake_members[] = {
    {"wake_at", T_PYSSIZET, offsetof(Intake, wake_at), 0,
     "wake() is called once the intake holds this many reports"},
    {"accepting", T_BOOL, offsetof(Intake, accepting), 0, "report() returns at once if false"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef intake_getset[] = {
    {"last_totals", intake_get_last_totals, NULL,
     "(total_steps, total_epochs) of the last report that gave either", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot intake_slots[] = {
    {Py_tp_doc, "Intake(capacity, wake): the training loop's side of Reporter.report()."},
    {Py_tp_init, intake_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, intake_dealloc},
    {Py_tp_traverse, intake_traverse},
    {Py_tp_clear, intake_clear},
    {Py_tp_methods, intake_methods},
    {Py_tp_members, intake_members},
    {Py_tp_getset, intake_getset},
    {Py_sq_length, intake_length},
    {0, NULL},
};

static PyType_Spec intake_spec = {
    .name = "headway._intake.Intake",
    .basicsize = sizeof(Intake),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = intake_slots,
};

static struct PyModuleDef intake_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "headway._intake",
    .m_doc = "The training loop's side of headway.Reporter.report(), in C.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__intake(void)
{
    name_step = PyUnicode_InternFromString("step");
    name_total_steps = PyUnicode_InternFromString("total_steps");
    name_epoch = PyUnicode_InternFromString("epoch");
    name_total_epochs = PyUnicode_InternFromString("total_epochs");
    if (!name_step || !name_total_steps || !name_epoch || !name_total_epochs)
        return NULL;
    PyObject *module = PyModule_Create(&intake_module);
    if (module == NULL)
        return NULL;
    PyObject *type = PyType_FromSpec(&intake_spec);
    if (type == NULL || PyModule_AddObject(module, "Intake", type) < 0) {
        Py_XDECREF(type);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
