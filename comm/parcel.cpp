#include "comm/parcel.h"

namespace brigade::comm {

Parcel wrap(const Tensor& t) {
  Parcel parcel{t, {}};
  if (t.defined() && t.device().is_cuda()) {
    parcel.ready = Event::create(t.device());
    parcel.ready.record(current_stream(t.device()));
  }
  return parcel;
}

Tensor unwrap(const Parcel& parcel, Device device) {
  const Tensor& t = parcel.tensor;
  if (!t.defined()) return t;
  if (parcel.ready.defined()) {
    // Whichever stream reads the tensor next must wait: this thread's current stream on the
    // tensor's device (the copy below runs there) and, when that differs, on the target device.
    const Stream here = current_stream(t.device());
    here.wait(parcel.ready);
    // The sender may drop its last reference at once, and the receiver may be the last holder: the
    // caching allocator must not hand the block out again (on the sender's stream) until this
    // stream has passed the point where the block is freed.
    record_stream(t, here);
    if (device.is_cuda() && device != t.device()) current_stream(device).wait(parcel.ready);
  }
  return t.device() == device ? t : t.to(device);
}

}  // namespace brigade::comm
